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


def _defaults(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, doc = cli(["envs"], environ, capsys)
    assert code == 0, doc
    return [r["path"] for r in doc["envs"] if r["default"]]


def _status_env(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> Any:
    code, doc = cli(["status"], environ, capsys)
    return doc.get("env") if code == 0 else None


@pytest.mark.parametrize("removed", ["first", "second", "vanished"])
def test_two_installs_and_a_removal_leave_one_default_that_every_command_uses(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str], removed: str  # noqa: F811
) -> None:
    """#43 item 5: `envs --json` marks exactly one default and `status` (no --env) acts on that
    env, after two --env installs and `envs remove` of either one, or one deleted behind the tool's
    back. (Before: `envs` read <state>/last-env while `status` read the fallback: a removal or a
    vanished dir left `envs` marking none while `status` acted on another.)"""
    environ = base_environ(tmp_path, served_index.url)
    first, second = tmp_path / "data" / "first", tmp_path / "data" / "second"
    _install(environ, first, capsys)
    _install(environ, second, capsys)
    assert _defaults(environ, capsys) == [str(second)] and _status_env(environ, capsys) == str(second)
    if removed == "vanished":
        shutil.rmtree(second)
        kept = first
    else:
        gone, kept = (first, second) if removed == "first" else (second, first)
        code, doc = cli(["envs", "remove", str(gone), "-y"], environ, capsys)
        assert code == 0 and doc["removed"] is True, doc
    assert _defaults(environ, capsys) == [str(kept)]
    assert _status_env(environ, capsys) == str(kept)
    code, doc = cli(["check"], environ, capsys)
    assert doc.get("env") == str(kept), doc


def test_envs_default_moves_it_and_only_to_a_live_env_of_ours(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    environ = base_environ(tmp_path, served_index.url)
    first, second = tmp_path / "data" / "first", tmp_path / "data" / "second"
    _install(environ, first, capsys)
    _install(environ, second, capsys)
    code, doc = cli(["envs", "default", str(first)], environ, capsys)
    assert code == 0 and doc["env"] == str(first) and doc["previous"] == str(second), doc
    assert _defaults(environ, capsys) == [str(first)] and _status_env(environ, capsys) == str(first)
    stranger = tmp_path / "stranger"
    (stranger / "bin").mkdir(parents=True)
    (stranger / "bin" / "python").symlink_to(sys.executable)
    code, doc = cli(["envs", "default", str(stranger)], environ, capsys)
    assert code == ExitCode.BAD_INPUT and "not an env tfgpu-install made" in doc["message"], doc
    assert _defaults(environ, capsys) == [str(first)]
    # a re-install that has nothing to do is not "an install that verified": it moves nothing
    _install(environ, second, capsys)
    assert _defaults(environ, capsys) == [str(first)]


def test_an_install_that_fails_its_verification_does_not_become_the_default(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    from tests.support.faults import armed

    environ = base_environ(tmp_path, served_index.url)
    first, broken = tmp_path / "data" / "first", tmp_path / "data" / "broken"
    _install(environ, first, capsys)
    with armed(fail_at="verify.run:before:eio"):
        code, _ = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(broken)],
                      environ, capsys)
    assert code != 0 and broken.is_dir()
    assert _defaults(environ, capsys) == [str(first)] and _status_env(environ, capsys) == str(first)
    code, doc = cli(["envs"], environ, capsys)
    rows = {r["path"]: r for r in doc["envs"]}
    assert rows[str(broken)]["incomplete"] is True and rows[str(first)]["incomplete"] is False
    # finished by running it again: verified, and then the default
    _install(environ, broken, capsys)
    assert _defaults(environ, capsys) == [str(broken)]
