"""install's no-op fast path (tfgpu_install/app/noop.py), end to end as real subprocesses: a real
install from the loopback index, then re-runs. The fast path answers exactly what the full
path answers, without importing the step machinery; a changed driver, changed flags, a
changed env (a package removed, a package's file edited in place), an edited rc file or a damaged
stamp each take the full path again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_kit import cli_env, run_cli
from tests.support.promised import absent

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")


def _install_args(env_dir: Path, *more: str) -> list[str]:
    return ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir), *more]


def _traced(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], bool]:
    """(the JSON answer, whether the full path ran): -X importtime lists every module imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfgpu_install", *args], env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    return json.loads(done.stdout), "tfgpu_install.steps" in done.stderr


def test_noop_fast_path_answers_as_the_full_path_and_steps_aside_on_change(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.write_text("export EDITOR=vi\n")
    env_dir = tmp_path / "data" / "tf-env"
    env = cli_env(tmp_env, knowledge, index.url)
    args = _install_args(env_dir, "--shell-rc", str(rc), "--json")
    first = run_cli(args, env)
    assert first.returncode == 0, first.stderr + first.stdout
    assert json.loads(first.stdout)["changed"] is True
    stamps = list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("noop/*.json"))
    assert len(stamps) == 1

    fast, full_ran = _traced(args, env)
    assert not full_ran and fast["changed"] is False
    assert {s["status"] for s in fast["steps"]} <= {"done", "unchanged"}
    # The answer runs no program and writes nothing: runner and files import subprocess and tempfile
    # where they run or write, not on this path.
    traced = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfgpu_install", *args], env=env,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines()
                if line.startswith("import time")}
    assert "tfgpu_install.app.noop" in imported and not {"subprocess", "tempfile", "threading"} & imported
    # The full path on the same complete env says the same, key for key.
    stamps[0].unlink()
    full, full_ran = _traced(args, env)
    assert full_ran and full == fast
    again, full_ran = _traced(args, env)  # the full no-op left a stamp too
    assert not full_ran and again == full

    # `verify` rewrites the verification record with the same verdict: still a no-op.
    assert run_cli(["verify", "--env", str(env_dir), "--cpu-ok"], env).returncode == 0
    after_verify, full_ran = _traced(args, env)
    assert not full_ran and after_verify == full

    # Changed flags: another invocation, the full path.
    _, full_ran = _traced(args + ["--wait"], env)
    assert full_ran

    # A driver appears (the temp root's /proc): the full path.
    proc = Path(tmp_env["TFGPU_ROOT"]) / "proc" / "driver" / "nvidia"
    proc.mkdir(parents=True)
    (proc / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC "
                                  "2024\n")
    _, full_ran = _traced(args, env)
    assert full_ran
    shutil.rmtree(Path(tmp_env["TFGPU_ROOT"]) / "proc")
    _, full_ran = _traced(args, env)
    assert full_ran  # gone again: a change as well

    # The user drops the activation block from the rc file: the full path puts it back.
    rc.write_text("export EDITOR=vi\n")
    fixed, full_ran = _traced(args, env)
    assert full_ran and fixed["changed"] is True and str(env_dir / "bin" / "activate") in rc.read_text()

    # The env changes under us (a package removed by hand): the full path reinstalls it.
    _, full_ran = _traced(args, env)
    assert not full_ran
    dist = next(env_dir.glob("lib/python*/site-packages/protobuf-*.dist-info"))
    shutil.rmtree(dist)
    redone, full_ran = _traced(args, env)
    assert full_ran and redone["changed"] is True

    # A package's file edited in place (its size changes, no directory's mtime does): the full path's
    # check of the installed files sees it and reinstalls the package; the stamp must not answer.
    _, full_ran = _traced(args, env)
    assert not full_ran
    module = next(env_dir.glob("lib/python*/site-packages/numpy/__init__.py"))
    with open(module, "ab") as fh:
        fh.write(b"# edited\n")
    repaired, full_ran = _traced(args, env)
    assert full_ran and repaired["changed"] is True and b"# edited" not in module.read_bytes()

    # The stored verification now says it failed: the full path verifies again.
    _, full_ran = _traced(args, env)
    assert not full_ran
    record = next(Path(tmp_env["TFGPU_STATE_DIR"]).glob("envs/*/verify.json"))
    doc = json.loads(record.read_text())
    doc["report"]["ok"] = False
    record.write_text(json.dumps(doc))
    reverified, full_ran = _traced(args, env)
    assert full_ran and [s["id"] for s in reverified["steps"] if s["status"] == "applied"][:1] == ["verify.run"]

    # A damaged stamp is no answer, never a failure.
    for stamp in Path(tmp_env["TFGPU_STATE_DIR"]).glob("noop/*.json"):
        stamp.write_text("{not json")
    _, full_ran = _traced(args, env)
    assert full_ran


def test_dry_run_and_failed_install_leave_no_stamp(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    args = _install_args(tmp_path / "data" / "tf-env")
    env = cli_env(tmp_env, knowledge, index.url)
    assert run_cli(args + ["--dry-run"], env).returncode == 0
    refused = run_cli(args + ["--cudnn-source", "archive", "--cudnn-archive", str(tmp_path / "none.tar.xz")], env)
    assert refused.returncode != 0
    assert list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("noop/*.json")) == []
