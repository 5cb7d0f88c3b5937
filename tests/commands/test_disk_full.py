"""A real full disk under the real CLI (a filled tmpfs): the state dir (lock, journal), the env
dir and a snapshot's `-o FILE`. Each: exit 6 with "no space left on <path>" first, never exit 1
or 7; the journal stays whole records; the same command finishes the job once space is freed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.full_disk import fill, tmpfs
from tests.support.install_kit import cli_env, run_cli
from tests.support.promised import absent
from tfgpu_install.errors import ExitCode

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")


def _environ(base: Path, knowledge: Path, index: Any, **dirs: Path) -> dict[str, str]:
    paths = {name: dirs.get(name, base / name) for name in ("home", "root", "state", "cache", "data")}
    for p in paths.values():
        p.mkdir(parents=True, exist_ok=True)
    tmp_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(paths["home"]),
               "TFGPU_ROOT": str(paths["root"]), "TFGPU_STATE_DIR": str(paths["state"]),
               "TFGPU_CACHE_DIR": str(paths["cache"]), "TFGPU_DATA_DIR": str(paths["data"])}
    return cli_env(tmp_env, knowledge, index.url, UV_CACHE_DIR=str(base.parent / "uv-cache"))


def _install(env_dir: Path, environ: dict[str, str]) -> Any:
    return run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
                    "--json"], environ)


def _error(done: Any) -> dict[str, Any]:
    assert done.returncode == ExitCode.ENVIRONMENT, (done.returncode, done.stdout, done.stderr)
    doc = json.loads(done.stdout)
    assert doc["error"] == "disk-full" and doc["message"].startswith("no space left on "), doc
    assert "run the same command again" in doc["hint"]
    return doc


def _whole_records(journal: Path) -> list[str]:
    raw = journal.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line)["event"] for line in raw.splitlines()]


def test_a_full_state_dir_is_exit_6_and_the_run_resumes(tmp_path: Path, index: Any, knowledge: Path) -> None:
    with tmpfs(tmp_path / "fs", "2m") as fs:
        environ = _environ(tmp_path, knowledge, index, state=fs / "state")
        filler = fill(fs)
        doc = _error(_install(tmp_path / "data" / "tf-env", environ))
        assert doc["message"].startswith(f"no space left on {fs}/state/"), doc
        assert "lock" in doc["message"] or "journal" in doc["message"]  # nothing was changed yet
        filler.unlink()
        done = _install(tmp_path / "data" / "tf-env", environ)
        assert done.returncode == 0, done.stdout + done.stderr
        journals = list((fs / "state" / "envs").glob("*/journal.jsonl"))
        assert len(journals) == 1 and "done" in _whole_records(journals[0])


def test_a_full_env_disk_is_exit_6_and_the_run_resumes(tmp_path: Path, index: Any, knowledge: Path) -> None:
    with tmpfs(tmp_path / "fs", "256m") as fs:
        environ = _environ(tmp_path, knowledge, index)
        env_dir = fs / "tf-env"
        filler = fill(fs, leave=512 * 1024)  # room for the venv, not for the packages
        doc = _error(_install(env_dir, environ))
        assert doc["message"].startswith("no space left on "), doc
        assert "packages.install" in doc["message"] or "env.create" in doc["message"], doc
        assert "free" in doc["message"] and "No space left on device" in doc["message"]  # the tool's own words
        journal = next((tmp_path / "state" / "envs").glob("*/journal.jsonl"))
        assert _whole_records(journal)[-1] == "failed"
        filler.unlink()
        done = _install(env_dir, environ)
        assert done.returncode == 0, done.stdout + done.stderr
        applied = {s["id"] for s in json.loads(done.stdout)["steps"] if s["status"] == "applied"}
        assert "packages.install" in applied and "verify.run" in applied
        assert run_cli(["status", "--env", str(env_dir), "--json"], environ).returncode == 0


def test_snapshot_export_to_a_full_disk_is_exit_6_and_leaves_no_file(
    tmp_path: Path, index: Any, knowledge: Path
) -> None:
    environ = _environ(tmp_path, knowledge, index)
    env_dir = tmp_path / "data" / "tf-env"
    assert _install(env_dir, environ).returncode == 0
    with tmpfs(tmp_path / "fs", "1m") as fs:
        fill(fs)
        out = fs / "snap.yaml"
        doc = _error(run_cli(["snapshot", "export", "--env", str(env_dir), "--no-hashes", "-o", str(out), "--json"],
                             environ))
        assert doc["message"].startswith(f"no space left on {out}; writing it; "), doc
        assert "needed" in doc["message"]
        assert sorted(p.name for p in fs.iterdir()) == ["filler"]  # no half-written file, no temp file
        req = fs / "requirements.txt"
        _error(run_cli(["snapshot", "export", "--env", str(env_dir), "--no-hashes", "--format", "requirements",
                        "-o", str(req), "--json"], environ))
        assert not req.exists()
