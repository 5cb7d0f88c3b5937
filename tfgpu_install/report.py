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
