"""The env lock is taken on the env's real path: every spelling of one env meets the same lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfgpu_install.context import Context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.errors import LockedError


def _spellings(tmp_path: Path) -> tuple[Path, list[Path]]:
    real_parent = tmp_path / "real"
    real_parent.mkdir()
    (tmp_path / "link").symlink_to(real_parent)
    env = real_parent / "env"
    return env, [tmp_path / "link" / "env", Path("/" + str(env)), real_parent / "." / "x" / ".." / "env"]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_every_spelling_of_one_env_meets_the_same_lock(ctx: Context, tmp_path: Path, which: int) -> None:
    env, others = _spellings(tmp_path)
    other = others[which]
    assert str(other) != str(env) and os.path.realpath(other) == str(env)
    with Executor(ctx, env).lock():
        with pytest.raises(LockedError):
            Executor(ctx, other).lock().acquire()
    with Executor(ctx, other).lock():  # released: the other spelling gets it
        pass


def test_the_lock_of_a_new_env_under_a_symlinked_parent_that_does_not_exist_yet(ctx: Context, tmp_path: Path) -> None:
    """The parent is created first, then resolved: the lock is the same as through the real dirs."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with Executor(ctx, tmp_path / "link" / "new" / "env").lock():
        with pytest.raises(LockedError):
            Executor(ctx, tmp_path / "real" / "new" / "env").lock().acquire()
