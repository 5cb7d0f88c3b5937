"""Bad input to `install`: one clear message with a fix, the documented exit code, nothing
half-written. In-process through cli.main (fast); the real steps run where they are reached."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import armed
from tests.support.install_kit import MATRIX, TOOL_CACHE, cli_env, write_knowledge
from tests.support.promised import absent
from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.files import tree_digest

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")


@pytest.fixture
def env(tmp_path: Path, tmp_env: dict[str, str], index: Any) -> dict[str, str]:
    return cli_env(tmp_env, write_knowledge(tmp_path / "knowledge"), index.url)


def _install(env: dict[str, str], *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    args = ["--json", "--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, *extra]
    code = main(args, environ=env)
    out = capsys.readouterr().out
    return code, json.loads(out)


def _state(tmp_path: Path) -> dict[str, str]:
    # The tool's own cache (TOOL_CACHE) may appear; nothing else may change.
    return {k: v for k, v in tree_digest(tmp_path).items()
            if not k.startswith("knowledge") and not k.startswith(TOOL_CACHE)}


def _without_cache(digest: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in digest.items() if not k.startswith(TOOL_CACHE)}


def test_unknown_profile(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    before = _state(tmp_path)
    code, doc = _install(env, "--profile", "bleeding-edge", capsys=capsys)
    assert code == ExitCode.USAGE and "bleeding-edge" in doc["message"]  # a typo on the command line (#43)
    assert "stable" in (doc["message"] + (doc["hint"] or ""))
    assert _state(tmp_path) == before


def test_broken_profile_yaml_names_file_and_line(
    tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    (Path(env["TFGPU_PROFILES_DIR"]) / "matrix.yaml").write_text(MATRIX.replace('cuda: "12.3"', "cuda: [12.3"))
    before = _state(tmp_path)
    code, doc = _install(env, capsys=capsys)
    assert code == ExitCode.BAD_INPUT
    assert "matrix.yaml:" in doc["message"]
    assert _state(tmp_path) == before


def test_env_path_is_a_file(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "data" / "not-a-dir"
    target.write_text("hello\n")
    before = _state(tmp_path)
    code, doc = _install(env, "--env", str(target), capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "env-is-file"
    assert doc["hint"]
    assert _state(tmp_path) == before


def test_interpreter_missing(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    before = _state(tmp_path)
    code, doc = _install(env, "--python", "/nonexistent/bin/python3.11", "--env", str(tmp_path / "data" / "e"),
                         capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "python-missing"
    code, doc = _install(env, "--python", "3.4", "--env", str(tmp_path / "data" / "e"), capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "python-missing" and "3.4" in doc["message"]
    assert _state(tmp_path) == before


def test_disk_full_mid_install_then_rollback(
    tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = _state(tmp_path)
    target = tmp_path / "data" / "e"
    with armed(fail_at="packages.install:middle:enospc"):
        code, doc = _install(env, "--env", str(target), capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "disk-full"
    assert "packages.install" in doc["message"] and "rollback" in doc["hint"]
    assert main(["rollback", "-y", "--env", str(target)], environ=env) == 0
    assert {k: v for k, v in _state(tmp_path).items() if not k.startswith("state")} == {
        k: v for k, v in before.items() if not k.startswith("state")
    }


def test_no_write_permission(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """As root, permission bits do not stop us: the fault hook raises the kernel's EACCES instead."""
    target = tmp_path / "data" / "e"
    with armed(fail_at="activation.write:middle:eacces"):
        code, doc = _install(env, "--env", str(target), capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "no-permission"
    assert main(["rollback", "-y", "--env", str(target)], environ=env) == 0
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_parent(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    parent = tmp_path / "ro"
    parent.mkdir(mode=0o555)
    code, doc = _install(env, "--env", str(parent / "e"), capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "no-permission"


def test_no_gpu_without_allow_cpu(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    before = _state(tmp_path)
    code = main(["--json", "--profile", "stable", "-y", "--env", str(tmp_path / "data" / "e")], environ=env)
    doc = json.loads(capsys.readouterr().out)
    assert code == ExitCode.NO_GPU and doc["error"] == "no-gpu" and "--allow-cpu" in doc["hint"]
    assert _state(tmp_path) == before


def test_no_tty_no_yes_refuses(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    before = _state(tmp_path)
    code = main(["--json", "--profile", "stable", "--allow-cpu", "--python", sys.executable,
                 "--env", str(tmp_path / "data" / "e")], environ=env)
    doc = json.loads(capsys.readouterr().out)
    assert code == ExitCode.USAGE and doc["error"] == "confirmation-needed" and "-y" in doc["hint"]
    assert _state(tmp_path) == before


def test_system_ldconfig_needs_root(env: dict[str, str], capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, doc = _install(dict(env, TFGPU_ROOT="/"), "--system-ldconfig", "--env", str(tmp_path / "data" / "e"),
                         capsys=capsys)
    assert code == ExitCode.ENVIRONMENT and doc["error"] == "needs-root" and "sudo" in doc["hint"]
    assert not (tmp_path / "data" / "e").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop to nobody")
def test_no_write_permission_as_a_real_user(env: dict[str, str]) -> None:
    """The CLI run as `nobody` against a directory it cannot write: refused before anything is written."""
    import subprocess
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="tfgpu-nobody-"))  # pytest's own tmp dirs are 0700
    try:
        base.chmod(0o755)
        dirs = {}
        for name in ("home", "root", "state", "cache", "data"):
            (base / name).mkdir(mode=0o777)
            (base / name).chmod(0o777)
            dirs[name] = str(base / name)
        knowledge = write_knowledge(base / "knowledge")
        for f in [knowledge, *knowledge.iterdir()]:
            f.chmod(0o755 if f.is_dir() else 0o644)
        locked = base / "locked"
        locked.mkdir(mode=0o755)
        run_env = dict(env, HOME=dirs["home"], TFGPU_ROOT=dirs["root"], TFGPU_STATE_DIR=dirs["state"],
                       TFGPU_CACHE_DIR=dirs["cache"], TFGPU_DATA_DIR=dirs["data"], TFGPU_PROFILES_DIR=str(knowledge))
        before = tree_digest(base)
        # An interpreter `nobody` can run (the test venv's may sit under root's home).
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        out = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "tfgpu_install",
             "--json", "--profile", "stable", "--allow-cpu", "-y", "--python", python,
             "--env", str(locked / "e")],
            env=run_env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )
        if not out.stdout.strip().startswith("{"):
            pytest.skip(f"nobody cannot run this interpreter here: {out.stderr[-300:]}")
        doc = json.loads(out.stdout)
        assert out.returncode == ExitCode.ENVIRONMENT and doc["error"] == "no-permission", out.stdout + out.stderr
        assert str(locked) in doc["message"]
        assert _without_cache(tree_digest(base)) == _without_cache(before)
    finally:
        shutil.rmtree(base, ignore_errors=True)


class _Tty:
    """A terminal that answers one line."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        return self.answer + "\n"


def test_interactive_no_cancels_and_changes_nothing(
    tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", _Tty("n"))
    before = _state(tmp_path)
    code = main(["--profile", "stable", "--allow-cpu", "--python", sys.executable,
                 "--env", str(tmp_path / "data" / "e")], environ=env)
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "Proceed?" in err and "cancelled" in err
    assert "env.create" in err  # the plan was shown before the question
    assert _state(tmp_path) == before


def test_interactive_yes_installs(
    tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", _Tty("y"))
    code = main(["--profile", "stable", "--allow-cpu", "--python", sys.executable,
                 "--env", str(tmp_path / "data" / "e")], environ=env)
    assert code == ExitCode.OK, capsys.readouterr().err
    assert (tmp_path / "data" / "e" / "bin" / "tfgpu-run").exists()


def test_a_refused_profile_leaves_no_thread_behind(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Input is checked before any work starts: no probe thread still runs (and writes the cache) once
    the command has returned its refusal."""
    import threading

    code, _ = _install(env, "--profile", "bleeding-edge", capsys=capsys)
    assert code == ExitCode.USAGE
    assert [t.name for t in threading.enumerate() if t.name == "probe" and t.is_alive()] == []
