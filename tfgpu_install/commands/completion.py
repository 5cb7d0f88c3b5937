"""`tfgpu-install completion bash|zsh|fish`: print the shell's completion script (argcomplete's; the
answers come from the parser itself: tfgpu_install/completion.py)."""

from __future__ import annotations

import argparse

from tfgpu_install.completion import SHELLS, script
from tfgpu_install.context import Context
from tfgpu_install.report import Result, Text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    text = script(args.shell)
    return Result(data={"shell": args.shell, "script": text},
                  blocks=[Text(line) for line in text.rstrip("\n").split("\n")])
