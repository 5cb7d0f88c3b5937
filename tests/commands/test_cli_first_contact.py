"""First contact with the command line: a bare `tfgpu-install` lists every command; a mistyped
command or flag gets one "did you mean" line (exit 2, USAGE), never "unrecognized arguments" alone."""

from __future__ import annotations

import pytest

from tfgpu_install.cli import main
from tfgpu_install.commands import COMMANDS


def test_bare_command_prints_the_full_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()}
    missing = [name for name in COMMANDS if name not in listed]
    assert len(COMMANDS) > 5 and not missing, missing


@pytest.mark.parametrize("argv, hint", [
    (["instal"], "did you mean `tfgpu-install install`?"),
    (["snapshots", "list"], "did you mean `tfgpu-install snapshot`?"),
    (["install", "--profle", "stable"], "did you mean `--profile`?"),
    (["plan", "--alow-cpu"], "did you mean `--allow-cpu`?"),
    (["--dryrun"], "did you mean `--dry-run`?"),
])
def test_did_you_mean(argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 2, err


def test_a_flag_of_another_command_is_not_suggested_as_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--uv-cache"]) == 2
    err = capsys.readouterr().err
    assert "did you mean `--uv-cache`" not in err


def test_a_word_far_from_every_command_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'xyzzy'" in err and "did you mean" not in err and "--help" in err
