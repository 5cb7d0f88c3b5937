"""The CLI layer: usage errors, the default command, --version."""

from __future__ import annotations

import subprocess
import sys

from tfgpu_install.cli import _with_default_command, main
from tfgpu_install.errors import ExitCode


def test_default_command_is_install() -> None:
    assert _with_default_command(["--profile", "stable"]) == ["install", "--profile", "stable"]
    assert _with_default_command(["-y", "--profile", "stable"])[0] == "install"
    assert _with_default_command(["probe", "--json"]) == ["probe", "--json"]
    assert _with_default_command(["--help"]) == ["--help"]


def test_unknown_flag_is_usage_error(capsys, tmp_env) -> None:  # type: ignore[no-untyped-def]
    code = main(["probe", "--no-such-flag"], environ=tmp_env)
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and "--help" in err


def test_version_as_real_subprocess() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tfgpu_install", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("tfgpu-install ")


def test_json_before_the_command_is_honoured_on_success(capsys, tmp_env) -> None:  # type: ignore[no-untyped-def]
    import json

    assert main(["--json", "profiles"], environ=tmp_env) == 0
    before = json.loads(capsys.readouterr().out)
    assert main(["profiles", "--json"], environ=tmp_env) == 0
    assert json.loads(capsys.readouterr().out) == before
    assert main(["profiles"], environ=tmp_env) == 0
    assert not capsys.readouterr().out.lstrip().startswith("{")
