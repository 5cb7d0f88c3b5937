"""`install --shell-rc FILE` and `rollback` through the real CLI (real venv, real uv installs from
the loopback wheelhouse, real verify on the CPU) against hostile rc files: the rc comes back byte
for byte (content, link, owner, mode); a broken one is refused before anything changes.
The same attacks against the step alone: tests/steps/test_shell_rc_safety.py."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_kit import cli_env, run_cli
from tests.support.promised import absent
from tfgpu_install.steps.shell_rc import env_block_id

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")

NOBODY = 65534


def _install_args(env_dir: Path, rc: Path) -> list[str]:
    return ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
            "--shell-rc", str(rc), "--json"]


def _identity(path: Path) -> tuple[object, ...]:
    link = os.readlink(path) if path.is_symlink() else None
    st_ = os.stat(path)
    return link, path.read_bytes(), st_.st_uid, st_.st_gid, stat.S_IMODE(st_.st_mode)


def test_unbalanced_markers_refused_before_anything_changes(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env_dir = tmp_path / "data" / "tf-env"
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.write_bytes(f"alias ll='ls -l'\n# >>> tfgpu-install {env_block_id(env_dir)} >>>\nexport KEEP=1\n".encode())
    before = _identity(rc)
    out = run_cli(_install_args(env_dir, rc), cli_env(tmp_env, knowledge, index.url))
    assert out.returncode == 5, out.stderr + out.stdout
    doc = json.loads(out.stdout)
    assert doc["error"] == "rc-markers-unbalanced" and "line 2" in doc["message"] and doc["hint"]
    assert _identity(rc) == before
    assert not env_dir.exists()  # refused before env.create
    assert not list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("envs/*/journal.jsonl"))


def test_rc_that_is_a_directory_is_refused(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env_dir = tmp_path / "data" / "tf-env"
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.mkdir()
    out = run_cli(_install_args(env_dir, rc), cli_env(tmp_env, knowledge, index.url))
    assert out.returncode == 6, out.stderr + out.stdout
    doc = json.loads(out.stdout)
    assert doc["error"] == "shell-rc-unusable" and "is a directory" in doc["message"]
    assert rc.is_dir() and not env_dir.exists()


def test_hostile_rc_comes_back_byte_for_byte(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """A dotfiles symlink to a CRLF, latin-1 file without a final newline, holding another env's
    block, owned by nobody with mode 0640: install, install again (no-op), rollback."""
    home = Path(tmp_env["HOME"])
    (home / "dotfiles").mkdir()
    target = home / "dotfiles" / "bashrc"
    target.write_bytes(b"# Fran\xe7ois\r\nexport A=1\r\n# >>> tfgpu-install other-0123456789ab >>>\r\n"
                       b". /other/bin/activate\r\n# <<< tfgpu-install other-0123456789ab <<<\r\nalias x=y")
    rc = home / ".bashrc"
    rc.symlink_to("dotfiles/bashrc")
    if os.geteuid() == 0:
        os.chown(target, NOBODY, NOBODY)
    target.chmod(0o640)
    before = _identity(rc)
    env_dir = tmp_path / "data" / "tf-env"
    env = cli_env(tmp_env, knowledge, index.url)

    first = run_cli(_install_args(env_dir, rc), env)
    assert first.returncode == 0, first.stderr + first.stdout
    installed = _identity(rc)
    assert installed[0] == "dotfiles/bashrc" and installed[2:] == before[2:]
    data = target.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n")
    assert f"# >>> tfgpu-install {env_block_id(env_dir)} >>> +nl\r\n".encode() in data
    assert data.startswith(before[1])  # type: ignore[arg-type]

    again = run_cli(_install_args(env_dir, rc), env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False
    assert _identity(rc) == installed

    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    assert _identity(rc) == before


def test_two_envs_share_one_rc(tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path) -> None:
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.write_bytes(b"export EDITOR=vi")
    before = _identity(rc)
    env = cli_env(tmp_env, knowledge, index.url)
    a, b = tmp_path / "data" / "env-a", tmp_path / "data" / "env-b"
    for env_dir in (a, b):
        done = run_cli(_install_args(env_dir, rc), env)
        assert done.returncode == 0, done.stderr + done.stdout
    b_line = f". {b}/bin/activate".encode()
    assert rc.read_bytes().count(b">>> tfgpu-install ") == 2 and b_line in rc.read_bytes()
    back = run_cli(["rollback", "-y", "--env", str(a), "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    data = rc.read_bytes()
    assert env_block_id(a).encode() not in data and env_block_id(b).encode() in data and b_line in data
    assert data.startswith(b"export EDITOR=vi\n# >>> tfgpu-install " + env_block_id(b).encode())
    back = run_cli(["rollback", "-y", "--env", str(b), "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    assert _identity(rc) == before


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_rc_in_a_read_only_directory_fails_before_the_env_is_made(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path, dry_run: bool
) -> None:
    """#38 item 4: the rc's directory must take the new file its edit is renamed from. A read-only
    one (a read-only mount: root ignores permission bits) used to fail only after the env and its
    packages were installed, with the hint "choose a writable --env"; now exit 6 before any step,
    also in --dry-run. Control: the same install with the rc in a writable dir works."""
    import subprocess

    ro = tmp_path / "ro-home"
    ro.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(ro)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        (ro / ".bashrc").write_text("export EDITOR=vi\n")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True, capture_output=True)
        env_dir = tmp_path / "data" / "tf-env"
        env = cli_env(tmp_env, knowledge, index.url)
        args = _install_args(env_dir, ro / ".bashrc") + (["--dry-run"] if dry_run else [])
        out = run_cli(args, env)
        assert out.returncode == 6, out.stderr + out.stdout
        doc = json.loads(out.stdout)
        assert doc["error"] == "shell-rc-unusable" and str(ro) in doc["message"] and "--env" not in doc["hint"], doc
        assert not env_dir.exists()
        assert not list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("envs/*/journal.jsonl"))
        if dry_run:  # the control: a writable rc, the same dry run passes
            ok = run_cli(_install_args(env_dir, Path(tmp_env["HOME"]) / ".bashrc") + ["--dry-run"], env)
            assert ok.returncode == 0, ok.stderr
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def test_a_cudnn_prefix_on_a_read_only_mount_fails_before_the_env_is_made(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """The other late check found while looking for them (#38 item 4): --cudnn-prefix where no file
    can be made failed at cudnn.place, after env.create and packages.install; now exit 6 first."""
    import subprocess

    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs (needs root)")
    try:
        env_dir = tmp_path / "data" / "tf-env"
        archive = tmp_path / "cudnn.tar.xz"
        subprocess.run(["tar", "-cJf", str(archive), "-C", str(tmp_path), "data"], check=True, capture_output=True)
        args = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
                "--cudnn-source", "archive", "--cudnn-archive", str(archive), "--cudnn-prefix", str(ro / "cudnn"),
                "--dry-run", "--json"]
        out = run_cli(args, cli_env(tmp_env, knowledge, index.url))
        assert out.returncode == 6 and "--cudnn-prefix" in json.loads(out.stdout)["message"], out.stdout
        assert not env_dir.exists()
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)
