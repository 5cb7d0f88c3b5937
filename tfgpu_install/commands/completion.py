"""`tfgpu-install completion bash|zsh|fish`: print a completion script for the shell
(tfgpu_install/completion.py writes it from the commands' own argparse flags)."""

from __future__ import annotations

import argparse
import importlib

from tfgpu_install.completion import SHELLS, Node
from tfgpu_install.context import Context
from tfgpu_install.report import Result, Text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=sorted(SHELLS), help="the shell to complete in")


def _node(parser: argparse.ArgumentParser, help_text: str = "") -> Node:
    flags: list[str] = []
    subs: dict[str, Node] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                subs[name] = _node(sub, helps.get(name, ""))
        elif action.help != argparse.SUPPRESS:
            flags.extend(action.option_strings)
    return Node(flags=tuple(flags), subs=subs, help=help_text)


def command_tree() -> Node:
    """Every command with its flags, as `tfgpu-install --help` and each `COMMAND --help` list them."""
    from tfgpu_install.commands import COMMANDS

    commands: dict[str, Node] = {}
    for name, row in COMMANDS.items():
        p = argparse.ArgumentParser(prog=f"tfgpu-install {name}")
        p.add_argument("--json", action="store_true")
        p.add_argument("--debug", action="store_true")
        importlib.import_module(f"tfgpu_install.commands.{row.module}").add_arguments(p)
        commands[name] = _node(p, row.help)
    return Node(flags=("--json", "--debug", "--help", "--version"), subs=commands)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    script = SHELLS[args.shell](command_tree())
    return Result(data={"shell": args.shell, "script": script},
                  blocks=[Text(line) for line in script.rstrip("\n").split("\n")])
