"""What commands return: result objects made of plain blocks. The console renders them.

Commands never print. A Result holds JSON-able data (the --json contract), the
human-readable blocks, and its exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence, Union

from tfgpu_install.errors import ExitCode


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Text:
    text: str
    style: str = ""  # "", "ok", "warn", "error", "dim"


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Bullets:
    title: str
    items: tuple[str, ...]
    style: str = ""


Block = Union[Heading, Text, Table, Bullets]


@dataclass
class Result:
    data: dict[str, Any]
    blocks: list[Block] = field(default_factory=list)
    exit_code: int = int(ExitCode.OK)

    def to_json(self) -> dict[str, Any]:
        return self.data


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A Table with every cell as text ('-' for None)."""
    return Table(
        title,
        tuple(columns),
        tuple(tuple("-" if c is None else str(c) for c in row) for row in rows),
    )


def human_bytes(n: float) -> str:
    """1536 -> "1.5 KiB": sizes and rates as people read them."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# --- fitting a table to a terminal's width (pure; the console draws) ----------------------------


def _chunks(cell: str) -> list[str]:
    """The pieces a cell may break between: after each `/` of a path-like word, at spaces otherwise."""
    out: list[str] = []
    for word in cell.split(" "):
        if "/" in word:
            parts = word.split("/")
            pieces = [p + "/" for p in parts[:-1]] + [parts[-1]]
            if len(pieces) > 1 and pieces[0] == "/":  # "/tmp/" stays whole: no line ends in a bare "/"
                pieces[:2] = ["/" + pieces[1]]
            out += pieces
        else:
            out.append(word)
        out.append(" ")
    return [c for c in out[:-1] if c != ""]


def _min_width(cell: str) -> int:
    return max([len(c) for c in _chunks(cell) if c != " "] + [1])


def wrap_cell(cell: str, width: int) -> list[str]:
    """A cell as lines of at most `width`: paths break only after a `/`, text at spaces; a piece
    longer than the width (a single path segment or word) is cut, as nothing else can fit."""
    lines: list[str] = []
    cur = ""
    for piece in _chunks(cell):
        if piece == " ":
            if cur:
                cur += " "
            continue
        if len(cur) + len(piece) <= width:
            cur += piece
            continue
        if cur.strip():
            lines.append(cur.rstrip(" "))
        cur = ""
        while len(piece) > width:
            lines.append(piece[:width])
            piece = piece[width:]
        cur = piece
    if cur.strip() or not lines:
        lines.append(cur.rstrip(" "))
    return lines


def fit_widths(columns: Sequence[str], rows: Sequence[Sequence[str]], room: int) -> list[int]:
    """Each column's width within `room` characters of cell content. Every column first gets the
    width of its longest unbreakable piece (a path segment, a word, its header); what is left goes
    to the path columns (those holding a `/`) up to their full width, then to the others."""
    n = len(columns)
    cells = [[col] + [r[i] for r in rows if i < len(r)] for i, col in enumerate(columns)]
    natural = [max(len(c) for c in col) for col in cells]
    if sum(natural) <= room:
        return natural
    widths = [max(_min_width(c) for c in col) for col in cells]
    left = room - sum(widths)
    if left <= 0:
        return widths  # even the unbreakable pieces do not fit: the console folds what it must
    paths = [i for i in range(n) if any("/" in c for c in cells[i][1:])]
    for group in (paths, [i for i in range(n) if i not in paths]):
        for i in group:
            give = min(left, natural[i] - widths[i])
            widths[i] += give
            left -= give
    return widths
