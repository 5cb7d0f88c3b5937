"""`tfgpu-install completion bash|zsh|fish`: print the shell's completion script (argcomplete's, made by
app/completion.py; the answers come from the parser itself: tfgpu_install/completion.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.app.completion import SHELLS
from tfgpu_install.context import Context
from tfgpu_install.report import Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.completion import Script


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.completion import script

    return render(script(args.shell))


def render(made: "Script") -> Result:
    return Result(data={"shell": made.shell, "script": made.text},
                  blocks=[Text(line) for line in made.text.rstrip("\n").split("\n")])
