"""The only module that imports rich: renders Results and errors, or JSON with --json."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO

from tfgpu_install.errors import TfgpuError
from tfgpu_install.guard.names import printable
from tfgpu_install.report import Bullets, Heading, Result, Table, Text, human_bytes
from tfgpu_install.transfer_rate import TransferRate

if TYPE_CHECKING:
    from rich.progress import TaskID

_STYLES = {"ok": "green", "warn": "yellow", "error": "bold red", "dim": "dim", "": ""}


def _console(stream: TextIO) -> Any:
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=False)


# Plain blocks (and every table when the output is not a terminal) are written without rich:
# importing it costs 30-100 ms, most of a no-op re-run's "already installed" line. The same
# text and colours (SGR codes, only on a terminal, NO_COLOR respected as rich does).
_SGR = {"ok": "32", "warn": "33", "error": "1;31", "dim": "2", "bold": "1"}


def _colour(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _paint(text: str, style: str, colour: bool) -> str:
    text = printable(text, keep_newlines=True)  # no control character from a file reaches the terminal
    code = _SGR.get(style)
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def _render_plain(result: Result, out: TextIO) -> None:
    c = _colour(out)
    lines: list[str] = []
    for block in result.blocks:
        if isinstance(block, Heading):
            lines.append(_paint(block.text, "bold", c))
        elif isinstance(block, Text):
            lines.append(_paint(block.text, block.style, c))
        elif isinstance(block, Bullets):
            if block.title:
                lines.append(_paint(block.title, "bold", c))
            lines += [_paint(f"  - {item}", block.style, c) for item in block.items]
        elif isinstance(block, Table):
            lines += _plain_table(block)
    out.write("".join(line + "\n" for line in lines))


def _plain_table(table: Table) -> list[str]:
    """A table for a log or a pipe: aligned columns indented under the title, a dashed rule under
    the header, one line per row (nothing folded, so grep finds a whole row), no box drawing."""
    rows = [[printable(" ".join(str(cell).split())) for cell in row] for row in table.rows]
    widths = [max([len(col)] + [len(r[i]) for r in rows if i < len(r)]) for i, col in enumerate(table.columns)]

    def line(cells: list[str]) -> str:
        return "  " + "  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip()

    out = [printable(table.title)] if table.title else []
    out += [line(list(table.columns)), line(["-" * w for w in widths])]
    return out + [line(r) for r in rows]


def render(result: Result, as_json: bool, stream: Optional[TextIO] = None) -> None:
    out = stream or sys.stdout
    if as_json:
        out.write(json.dumps(result.to_json(), indent=2, sort_keys=False, default=str) + "\n")
        return
    if not _isatty(out) or not any(isinstance(b, Table) for b in result.blocks):
        # rich draws the tables on a terminal; a log or a pipe gets plain text, without the
        # 30-50 ms of importing and laying out rich
        _render_plain(result, out)
        return
    from rich.markup import escape as rich_escape
    from rich.table import Table as RichTable

    def escape(text: str) -> str:
        return rich_escape(printable(text, keep_newlines=True))

    con = _console(out)
    for block in result.blocks:
        if isinstance(block, Heading):
            con.print(f"[bold]{escape(block.text)}[/bold]")
        elif isinstance(block, Text):
            style = _STYLES.get(block.style, "")
            con.print(f"[{style}]{escape(block.text)}[/{style}]" if style else escape(block.text))
        elif isinstance(block, Bullets):
            if block.title:
                con.print(f"[bold]{escape(block.title)}[/bold]")
            style = _STYLES.get(block.style, "")
            for item in block.items:
                line = f"  - {escape(item)}"
                con.print(f"[{style}]{line}[/{style}]" if style else line)
        elif isinstance(block, Table):
            con.print(_rich_table(RichTable, block, con.width, escape))


def _rich_table(rich_table: Any, block: Table, width: int, escape: Callable[[str], str]) -> Any:
    """A table within the terminal's width: the cells are wrapped here (report.fit_widths/wrap_cell),
    so a path breaks only after a `/` and the path column gets the room before the others (rich's
    own folding would cut `/home/some|one` anywhere)."""
    from tfgpu_install.report import fit_widths, wrap_cell

    rows = [[printable(" ".join(str(c).split())) for c in row] for row in block.rows]
    room = width - (3 * len(block.columns) + 1)  # the box's borders and one space of padding each side
    widths = fit_widths(block.columns, rows, room)
    t = rich_table(title=escape(block.title) or None, title_justify="left", show_lines=False)
    for col, w in zip(block.columns, widths):
        t.add_column(escape(col), width=w, no_wrap=True, overflow="fold")
    for row in rows:
        t.add_row(*("\n".join(escape(line) for line in wrap_cell(c, w)) for c, w in zip(row, widths)))
    return t


def render_error(err: TfgpuError, as_json: bool, stream: Optional[TextIO] = None) -> None:
    out = stream or sys.stderr
    if as_json:
        # Errors in --json mode go to stdout as a document too, so scripts can read them.
        sys.stdout.write(json.dumps(err.to_json(), indent=2) + "\n")
        return
    c = _colour(out)
    message, hint = printable(err.message, keep_newlines=True), printable(err.hint or "", keep_newlines=True)
    out.write(f"{_paint('error', 'error', c)} [{err.ref}]: {message}\n")
    if hint:
        out.write(f"{_paint('fix:', 'warn', c)} {hint}\n")


class Progress:
    """A progress sink for long work: rich's live rows on a terminal (one per task: each step with its
    own elapsed timer, each active download with bytes, rate and time left), plain lines otherwise
    (a log, CI), at most one per PLAIN_EVERY seconds for the same task. Never used under --json.

    A task is named by the text before ": " (e.g. "installing 15 requirements with uv: 3/12
    downloads, ..."): the rest is its changing detail. A counter task (total <= 100: steps, layers)
    that moves on after a second or more gets a plain line saying how long that step took."""

    PLAIN_EVERY = 5.0
    SLOW_STEP_S = 1.0

    def __init__(self, enabled: bool, stream: Optional[TextIO] = None) -> None:
        import time

        self._clock = time.monotonic
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.rich = enabled and _isatty(self.stream)
        self._bar: Any = None
        self._tasks: dict[str, TaskID] = {}  # a progress row per key
        self._last: dict[str, tuple[float, tuple[str, float]]] = {}
        self._step: dict[str, tuple[str, float]] = {}  # counter task -> (its current line, since when)
        self._rates: dict[str, TransferRate] = {}  # bytes task -> its smoothed rate (transfer_rate.py)

    def __call__(self, what: str, done: float, total: Optional[float]) -> None:
        if not self.enabled:
            return
        what = printable(what)
        key = what.split(": ", 1)[0]
        counter = total is not None and total <= 100  # steps or layers, not bytes
        if not counter:
            self._rates.setdefault(key, TransferRate()).add(self._clock(), done)
        if not self.rich:
            return self._plain(key, what, done, total)
        if self._bar is None:
            self._bar = _rich_progress(self.stream)
            self._bar.start()
        amount = None if counter else self._amount(key, done, total)
        if key not in self._tasks:
            self._tasks[key] = self._bar.add_task(what, total=total, counter=counter, amount=amount)
        elif counter and self._bar.tasks[self._tasks[key]].description != what:
            # a new step: its own elapsed time
            self._bar.reset(self._tasks[key], total=total, completed=done, description=what, counter=counter)
            return
        self._bar.update(self._tasks[key], completed=done, total=total, description=what, counter=counter,
                         amount=amount)
        if not counter and total and done >= total and key.startswith("download "):
            self._bar.remove_task(self._tasks.pop(key))  # a row per *active* download

    def _amount(self, key: str, done: float, total: Optional[float]) -> str:
        """A bytes row's numbers: done/total, the smoothed rate and the time left once there is one."""
        rate = self._rates[key].rate()
        left = self._rates[key].left(done, total)
        text = f"{human_bytes(done)}/{human_bytes(total)}" if total else human_bytes(done)
        if rate:
            text += f" {human_bytes(rate)}/s"
        if left is not None:
            text += f" ETA {_duration(left)}"
        return text

    def _plain(self, key: str, what: str, done: float, total: Optional[float]) -> None:
        now = self._clock()
        last = self._last.get(key)
        counter = total is not None and total <= 100  # steps or layers, not bytes
        finished = total is not None and done >= total
        if counter:
            self._step_took(key, what, now)
        if last is not None:
            same = last[1] == (what, done) or (finished and last[1][1] == done)  # the rate alone moved
            if same or not (finished or counter or now - last[0] >= self.PLAIN_EVERY):
                return
        self._last[key] = (now, (what, done))
        if counter:
            line = f"{what} [{done:.0f}/{total:.0f}]"
        elif done > 0 and "/s" not in what and f"{human_bytes(done)} of " not in what:
            # bytes, where the line does not say them itself: how many, how fast, how long still (smoothed)
            rate, left = self._rates[key].rate(), self._rates[key].left(done, total)
            line = f"{what}: {human_bytes(done)}" + (f" of {human_bytes(total)}" if total else "")
            if rate:
                line += f" ({human_bytes(rate)}/s" + (f", {_duration(left)} left" if left is not None else "") + ")"
        else:
            line = what
        self.stream.write(f"  ... {printable(line)}\n")
        self.stream.flush()

    def _step_took(self, key: str, what: str, now: float) -> None:
        previous = self._step.get(key)
        if previous is not None and previous[0] != what:
            took = now - previous[1]
            if took >= self.SLOW_STEP_S:
                self.stream.write(f"  ... {previous[0]}: took {_duration(took)}\n")
        if previous is None or previous[0] != what:
            self._step[key] = (what, now)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _duration(seconds: float) -> str:
    """3.2 -> "3.2 s", 95 -> "1 min 35 s"."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _rich_progress(stream: TextIO) -> Any:
    """rich's Progress with columns for both kinds of task: a counter ([3/12]) or bytes (12.1/589.2 MiB,
    the rate and the time left); every row shows its elapsed time."""
    from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress
    from rich.table import Column
    from rich.text import Text as RichText

    class Amount(ProgressColumn):
        def render(self, task: Any) -> Any:
            if task.total is None:
                return RichText("")
            if task.fields.get("counter"):
                return RichText(f"[{task.completed:.0f}/{task.total:.0f}]")
            # the numbers Progress worked out (a smoothed rate, no time left until it is sure: transfer_rate.py)
            return RichText(str(task.fields.get("amount") or ""))

    # the numbers never wrap or get cut: the description gives way (ellipsis) to fit the terminal's width
    return RichProgress(
        TextColumn("{task.description}", markup=False, table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
        BarColumn(bar_width=16), Amount(table_column=Column(no_wrap=True)), TimeElapsedColumn(),
        console=_console(stream), transient=True, expand=True,
    )


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
