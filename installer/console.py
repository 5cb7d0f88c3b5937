"""The only module that imports rich: renders Results and errors, or JSON with --json."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional, TextIO

from .errors import TfgpuError
from .report import Bullets, Heading, Result, Table, Text

_STYLES = {"ok": "green", "warn": "yellow", "error": "bold red", "dim": "dim", "": ""}


def _console(stream: TextIO) -> Any:
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=False)


def render(result: Result, as_json: bool, stream: Optional[TextIO] = None) -> None:
    out = stream or sys.stdout
    if as_json:
        out.write(json.dumps(result.to_json(), indent=2, sort_keys=False, default=str) + "\n")
        return
    from rich.markup import escape
    from rich.table import Table as RichTable

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
            t = RichTable(title=block.title or None, title_justify="left", show_lines=False)
            for col in block.columns:
                t.add_column(col, overflow="fold")
            for row in block.rows:
                t.add_row(*(escape(c) for c in row))
            con.print(t)


def render_error(err: TfgpuError, as_json: bool, stream: Optional[TextIO] = None) -> None:
    out = stream or sys.stderr
    if as_json:
        # Errors in --json mode go to stdout as a document too, so scripts can read them.
        sys.stdout.write(json.dumps(err.to_json(), indent=2) + "\n")
        return
    from rich.markup import escape

    con = _console(out)
    con.print(f"[bold red]error[/bold red] {escape('[' + err.ref + ']')}: {escape(err.message)}")
    if err.hint:
        con.print(f"[yellow]fix:[/yellow] {escape(err.hint)}")


class Progress:
    """A progress sink for long steps: a rich bar on a terminal, silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}

    def __call__(self, what: str, done: float, total: Optional[float]) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(console=_console(sys.stderr), transient=True)
            self._bar.start()
        if what not in self._tasks:
            self._tasks[what] = self._bar.add_task(what, total=total)
        self._bar.update(self._tasks[what], completed=done, total=total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
