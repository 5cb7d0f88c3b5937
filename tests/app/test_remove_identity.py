"""#39 item 5 (and the rollback that shares its undo): an env is removed only while the path is still
the directory tfgpu-install made (device, inode, real path, a marker with its token), looked at
without following links. Real installs from the loopback index, the real CLI in-process."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.restore_kit import base_environ, cli, needs_gcc, served_index  # noqa: F401 (fixture)
from tfgpu_install.env.ownership import MARKER, dir_identity, problem, stamp
from tfgpu_install.errors import ExitCode

pytestmark = needs_gcc


def _install(environ: dict[str, str], env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env)],
                    environ, capsys)
    assert code == 0, doc


def _users_dir(path: Path) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")  # even one that looks like a venv
    (path / "thesis.tex").write_text("three years of work\n")
    return path


def test_remove_and_rollback_leave_the_users_own_directory_put_where_the_env_was(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    environ = base_environ(tmp_path, served_index.url)
    env, other = tmp_path / "data" / "tf", tmp_path / "data" / "control"
    _install(environ, env, capsys)
    _install(environ, other, capsys)
    shutil.rmtree(env)  # gone behind the tool's back, then the user's own directory at that path
    _users_dir(env)
    code, doc = cli(["envs", "remove", str(env), "-y"], environ, capsys)
    assert code == ExitCode.BAD_INPUT and doc["error"] == "env-replaced", doc
    assert (env / "thesis.tex").read_text() == "three years of work\n"
    code, doc = cli(["rollback", "--env", str(env), "-y"], environ, capsys)
    assert code == 0, doc
    assert (env / "thesis.tex").read_text() == "three years of work\n"
    # the control: the env it made, untouched, goes
    code, doc = cli(["envs", "remove", str(other), "-y"], environ, capsys)
    assert code == 0 and doc["removed"] is True and not other.exists(), doc


def test_a_parent_swapped_for_a_link_into_another_tree_is_not_followed(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    environ = base_environ(tmp_path, served_index.url)
    parent = tmp_path / "data" / "envs"
    env = parent / "tf"
    _install(environ, env, capsys)
    parent.rename(tmp_path / "data" / "moved")
    _users_dir(tmp_path / "elsewhere" / "tf")
    parent.symlink_to(tmp_path / "elsewhere")  # data/envs -> elsewhere: data/envs/tf is the user's tree
    code, doc = cli(["envs", "remove", str(env), "-y"], environ, capsys)
    assert code == ExitCode.BAD_INPUT and doc["error"] == "env-replaced" and "real path" in doc["message"], doc
    assert (tmp_path / "elsewhere" / "tf" / "thesis.tex").is_file()
    code, doc = cli(["rollback", "--env", str(env), "-y"], environ, capsys)
    assert code == 0, doc
    assert (tmp_path / "elsewhere" / "tf" / "thesis.tex").is_file()


def test_a_killed_create_then_a_replaced_directory_is_left_by_rollback(
    tmp_path: Path, served_index: Any, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    """The executor's undo of a killed env.create removed whatever was at the path (it was not
    there before the step began): now only the directory the step was making."""
    from tests.support.faults import fault_env
    from tests.support.install_kit import run_cli

    environ = base_environ(tmp_path, served_index.url)
    env = tmp_path / "data" / "tf"
    killed = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env)],
                     fault_env(environ, kill_at="env.create:middle"))
    assert killed.returncode == -9
    shutil.rmtree(env)
    _users_dir(env)
    code, doc = cli(["rollback", "--env", str(env), "-y"], environ, capsys)
    assert code == 0, doc
    assert (env / "thesis.tex").is_file()
    # the control: killed again, not replaced, rollback removes what the step made
    shutil.rmtree(env)
    env2 = tmp_path / "data" / "tf2"
    killed = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env2)],
                     fault_env(environ, kill_at="env.create:middle"))
    assert killed.returncode == -9 and env2.is_dir()
    code, doc = cli(["rollback", "--env", str(env2), "-y"], environ, capsys)
    assert code == 0 and not env2.exists(), doc


def test_identity_needs_the_same_inode_real_path_and_marker(tmp_path: Path) -> None:
    d = tmp_path / "env"
    d.mkdir()
    ident = stamp(d)
    assert problem(d, ident) is None
    # an inode number reused by a new directory (forged here): the marker tells them apart
    shutil.rmtree(d)
    d.mkdir()
    now = dir_identity(d)
    assert now is not None
    assert "marker" in str(problem(d, {**ident, "dev": now["dev"], "ino": now["ino"]}))
    assert "inode" in str(problem(d, ident)) or "marker" in str(problem(d, ident))
    link = tmp_path / "link"
    link.symlink_to(d)
    assert "not a directory" in str(problem(link, ident))
    os.rmdir(d)
    assert problem(d, ident) == "it is gone"
    assert not (tmp_path / MARKER).exists()
