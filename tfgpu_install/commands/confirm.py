"""Asking the user before a command changes the machine: the command words what it is about to do (the
app hands it over through `ask`) and this puts the question on the terminal."""

from __future__ import annotations

import sys
from typing import Callable, Union

from tfgpu_install.context import Context
from tfgpu_install.errors import UsageError
from tfgpu_install.report import Block, Result


def confirm(ctx: Context, yes: bool, blocks: Union[list[Block], Callable[[], list[Block]]]) -> None:
    """Ask before a change (install, restore over an env, rollback); -y skips the question. `blocks` may be
    a function: what only a person reads (sizes, package changes) is then worked out only when asked."""
    if yes:
        return
    stdin = ctx.input()
    if stdin is None or not stdin.isatty():
        raise UsageError(
            "refusing to change this machine without confirmation (stdin is not a terminal)",
            hint="pass -y to proceed, or --dry-run to see the plan first",
            ref="confirmation-needed",
        )
    from tfgpu_install.console import render  # the console is the only printer

    render(Result(data={}, blocks=blocks() if callable(blocks) else blocks), as_json=False, stream=sys.stderr)
    sys.stderr.write("Proceed? [y/N] ")
    sys.stderr.flush()
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("cancelled: nothing was changed", hint="run again and answer y, or pass -y", ref="cancelled")
