"""Every command's `--help` starts with its one line and ends with one real example, both from the one
command table (commands/__init__.py); each example parses with the real parser, so an example naming a flag
that was renamed or removed fails here."""

from __future__ import annotations

import shlex

import pytest

from tfgpu_install.cli import build_parser, main
from tfgpu_install.commands import COMMANDS


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_has_the_one_line_and_the_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    row = COMMANDS[name]
    assert row.help in out
    assert out.rstrip().endswith(f"example:\n  {row.example}"), out[-300:]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_example_is_a_command_line_the_parser_takes(name: str) -> None:
    words = shlex.split(COMMANDS[name].example)
    assert words[:2] == ["tfgpu-install", name]
    args = build_parser(only=name).parse_args(words[1:])  # a usage error raises UsageError
    assert args.command == name


def test_a_broken_example_is_refused_by_the_parser() -> None:
    """The control: the check above really parses (a mistyped flag is a usage error, not ignored)."""
    from tfgpu_install.errors import UsageError

    with pytest.raises(UsageError):
        build_parser(only="plan").parse_args(["plan", "--tensorflw", "2.15"])


def _actions() -> list[tuple[str, str]]:
    """(COMMAND, ACTION) for every command with actions of its own, from the parser the CLI builds."""
    import argparse

    found = []
    for name in COMMANDS:
        top = build_parser(only=name)
        (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
        for action in sub.choices[name]._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += [(name, child) for child in action.choices]
    return found


ACTIONS = _actions()


def test_the_actions_are_found() -> None:
    assert ("snapshot", "restore") in ACTIONS and ("envs", "remove") in ACTIONS and len(ACTIONS) > 15


@pytest.mark.parametrize("name, action", ACTIONS)
def test_every_action_has_its_line_and_an_example_that_parses(name: str, action: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    examples = dict(COMMANDS[name].actions)
    assert action in examples, f"`{name} {action}` has no example in COMMANDS[{name!r}].actions"
    with pytest.raises(SystemExit):
        main([name, action, "--help"])
    out = capsys.readouterr().out
    assert out.split("\n\n")[1].strip(), "no description line"
    assert out.rstrip().endswith(f"example:\n  {examples[action]}"), out[-300:]
    words = shlex.split(examples[action])
    assert words[:3] == ["tfgpu-install", name, action]
    build_parser(only=name).parse_args(words[1:])


def test_no_example_for_an_action_that_does_not_exist() -> None:
    stale = [(name, action) for name, row in COMMANDS.items() for action, _ in row.actions
             if (name, action) not in ACTIONS]
    assert not stale, stale
