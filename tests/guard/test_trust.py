"""One trust rule for files read back from the state, cache and data dirs: owned by this user,
writable by no one else, dirs on the way likewise; else ENVIRONMENT (exit 6), never followed.
(The tests run as root, which owns all they create: chown 65534 makes a file someone else's.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tfgpu_install.cli import main
from tfgpu_install.context import Context
from tfgpu_install.env.journal import Journal
from tfgpu_install.env.state import known_envs
from tfgpu_install.errors import EnvironmentProblem, ExitCode

NOBODY = 65534


def _foreign(path: Path, how: str) -> None:
    if how == "owner":
        os.chown(path, NOBODY, NOBODY)
    else:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)


def _journal(ctx: Context, env: Path, victim: Path) -> Journal:
    j = Journal.for_env(ctx, env)
    j.append("run", env=str(env), plan={})
    j.append("begin", step="env.create", touches=[str(victim)])
    j.append("done", step="env.create", undo={"created": True, "path": str(victim)})
    return j


@pytest.mark.parametrize("how", ["owner", "mode"])
@pytest.mark.parametrize("which", ["file", "dir", "state"])
def test_a_journal_someone_else_can_write_is_not_run_by_rollback(
        ctx: Context, tmp_env: dict[str, str], tmp_path: Path, how: str, which: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "env"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    j = _journal(ctx, env, victim)
    _foreign({"file": j.path, "dir": j.path.parent, "state": ctx.state_dir}[which], how)
    with pytest.raises(EnvironmentProblem) as info:
        j.entries()
    assert info.value.code == ExitCode.ENVIRONMENT and "another user" in info.value.message
    code = main(["rollback", "--env", str(env), "-y"], environ=tmp_env)
    assert code == ExitCode.ENVIRONMENT, capsys.readouterr()
    assert "refusing to read the journal" in capsys.readouterr().err
    assert (victim / "keep").read_text() == "x"


def test_known_envs_skips_a_foreign_journal(ctx: Context, tmp_path: Path) -> None:
    j = _journal(ctx, tmp_path / "env", tmp_path / "v")
    assert known_envs(ctx) == [tmp_path / "env"]
    _foreign(j.path, "owner")
    assert known_envs(ctx) == []


@pytest.mark.parametrize("how", ["owner", "mode"])
def test_a_foreign_knowledge_cache_is_refused(ctx: Context, tmp_path: Path, how: str) -> None:
    from tfgpu_install.knowledge import load

    load._load_cached.cache_clear()
    load.load_knowledge(None, cache_dir=ctx.cache_dir)  # writes the cache
    (cached,) = (ctx.cache_dir / "knowledge").glob("*.json")
    _foreign(cached, how)
    load._load_cached.cache_clear()
    with pytest.raises(EnvironmentProblem) as info:
        load.load_knowledge(None, cache_dir=ctx.cache_dir)
    assert str(cached) in info.value.message
    load._load_cached.cache_clear()


def test_a_memo_in_a_dir_others_can_write_is_not_believed(ctx: Context) -> None:
    from tfgpu_install.steps.load_memo import MEMO_FILE, known_to_load, remember_load

    remember_load(ctx.cache_dir, "k1")
    assert known_to_load(ctx.cache_dir, "k1")
    _foreign((ctx.cache_dir / MEMO_FILE).parent, "mode")
    assert not known_to_load(ctx.cache_dir, "k1")


def test_a_foreign_cached_download_is_refused(ctx: Context) -> None:
    import hashlib

    from tfgpu_install.fetch.download import cached_path, fetch

    data = b"cudnn archive bytes"
    digest = hashlib.sha256(data).hexdigest()
    path = cached_path(ctx, digest)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    assert fetch(ctx, "https://127.0.0.1:9/x.tar.xz", digest).cached
    _foreign(path, "owner")
    with pytest.raises(EnvironmentProblem):
        fetch(ctx, "https://127.0.0.1:9/x.tar.xz", digest)


def test_a_foreign_env_registry_is_refused(ctx: Context, tmp_path: Path) -> None:
    from tfgpu_install.app.envs import last_env, remember_env

    remember_env(ctx, tmp_path / "env")
    assert last_env(ctx) == tmp_path / "env"
    (reg,) = [p for p in ctx.state_dir.rglob("*") if p.is_file()]
    _foreign(reg, "mode")
    with pytest.raises(EnvironmentProblem):
        last_env(ctx)


def test_own_private_files_pass(ctx: Context, tmp_path: Path) -> None:
    j = _journal(ctx, tmp_path / "env", tmp_path / "v")
    assert [e.event for e in j.entries()] == ["run", "begin", "done"]
    assert json.loads(j.path.read_text().splitlines()[0])["event"] == "run"


def test_a_umask_002_dir_of_the_users_private_group_passes_another_group_does_not(tmp_path: Path) -> None:
    """Debian/Ubuntu give users umask 002 with a private group: that group-write is the user's own."""
    import grp
    import pwd

    from tfgpu_install.guard.trust import problem

    me = pwd.getpwuid(os.getuid()).pw_name
    if grp.getgrgid(os.getgid()).gr_name != me:
        pytest.skip("this user has no private group")
    d = tmp_path / "state"
    d.mkdir()
    (d / "f").write_text("x")
    os.chmod(d, 0o775)
    assert problem(d / "f", d) is None
    os.chown(d, os.getuid(), NOBODY)
    assert problem(d / "f", d) is not None and "group" in str(problem(d / "f", d))
