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
