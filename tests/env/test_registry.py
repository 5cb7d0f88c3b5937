"""One registry of envs that tells the truth: after a rollback or a vanished directory, the
default env is the newest one that still exists, else none; `status`, `check`, `verify` and
`doctor` without --env then behave as on a machine with no env (real installs, real rollback)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.restore_kit import base_environ, cli, needs_gcc, served_index  # noqa: F401 (fixture)
from tfgpu_install.context import build_context
from tfgpu_install.env.registry import default_env, forget_env, live_envs
from tfgpu_install.errors import ExitCode

pytestmark = needs_gcc


def _install(environ: dict[str, str], env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env)],
                    environ, capsys)
    assert code == 0, doc


def _no_env_everywhere(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """What a machine with no env answers, command by command (no GPU here)."""
    for args in (["status"], ["check"]):
        code, err = cli(args, environ, capsys)
        assert code == ExitCode.ENVIRONMENT == 6 and err["error"] == "env-not-found", (args, err)
        assert "install one first" in err["hint"]
    code, doc = cli(["verify"], environ, capsys)
    assert code == ExitCode.NO_GPU and doc["mode"] == "host" and doc["env"] is None
    assert "no environment installed" in doc["next"]
    code, doc = cli(["doctor"], environ, capsys)
    assert code == ExitCode.NO_GPU and doc["env"] is None


def test_rollback_and_a_vanished_dir_move_the_default_env(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    environ = base_environ(tmp_path, served_index.url)
    ctx = build_context(environ)
    first, second = tmp_path / "data" / "first", tmp_path / "data" / "second"
    _install(environ, first, capsys)
    _install(environ, second, capsys)
    assert default_env(ctx) == second and live_envs(ctx)[:2] == [second, first]
    code, doc = cli(["status"], environ, capsys)
    assert code == 0 and doc["env"] == str(second)

    code, _ = cli(["rollback", "-y"], environ, capsys)  # the default one: `second`
    assert code == 0 and not second.exists()
    assert default_env(ctx) == first
    code, doc = cli(["status"], environ, capsys)
    assert code == 0 and doc["env"] == str(first) and doc["installed"] is True
    code, doc = cli(["check"], environ, capsys)
    assert code == 0 and doc["env"] == str(first)

    # A directory that vanished behind the tool's back: no longer the default, and nothing else is left.
    shutil.rmtree(first)
    assert default_env(ctx) is None and live_envs(ctx) == []
    _no_env_everywhere(environ, capsys)
    # An env named that does not exist: the same rule (exit 6, env-not-found) for every command.
    for args in (["status", "--env", str(first)], ["check", "--env", str(first)], ["verify", "--env", str(first)],
                 ["doctor", "--env", str(first)]):
        code, err = cli(args, environ, capsys)
        assert code == 6 and err["error"] == "env-not-found" and str(first) in err["message"], (args, err)


def test_forget_env_falls_back_to_none_on_an_empty_registry(tmp_path: Path) -> None:
    from tests.conftest import make_tmp_env
    from tfgpu_install.env.registry import remember_env

    ctx = build_context(make_tmp_env(tmp_path))
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    remember_env(ctx, env)
    assert default_env(ctx) == env
    assert forget_env(ctx, env) is None and default_env(ctx) is None
    assert not (tmp_path / "state" / "last-env").exists()
