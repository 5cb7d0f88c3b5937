"""Faults on a real process: kill -9 at every step boundary and in the middle of each step,
then resume and rollback; two concurrent runs on one env.

The process is tests/support/engine.py driving the real executor, journal and lock over
real files (the full CLI chain gets the same treatment in tests/commands/test_install_faults.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.faults import fault_env, wait_stopped
from tfgpu_install.env.journal import Journal
from tfgpu_install.files import tree_digest

DRIVER = Path(__file__).resolve().parents[1] / "support" / "engine.py"
STEPS = ["env.create", "packages.install", "activation.write", "ldconfig.system"]


def _seed(root: Path) -> None:
    (root / "home").mkdir(parents=True)
    (root / "home" / ".bashrc").write_text("alias ll='ls -l'\n# no newline at the end")
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (root / "etc" / "ld.so.conf.d" / "other.conf").write_text("/opt/other/lib\n")


def _drive(root: Path, env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    full = fault_env(env, **extra)
    return subprocess.run(
        [sys.executable, str(DRIVER), str(root), *args], env=full, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def reference(tmp_path_factory: pytest.TempPathFactory, tmp_env: dict[str, str]) -> dict[str, str]:
    """The tree after an uninterrupted install."""
    root = tmp_path_factory.mktemp("ref")
    _seed(root)
    env = dict(tmp_env, TFGPU_STATE_DIR=str(root.parent / "ref-state"))
    assert _drive(root, env, "install").returncode == 0
    return tree_digest(root)


@pytest.mark.parametrize("where", ["before", "middle", "after"])
@pytest.mark.parametrize("step", STEPS)
def test_kill_resume_and_rollback(
    step: str, where: str, tmp_path: Path, tmp_env: dict[str, str], reference: dict[str, str]
) -> None:
    root = tmp_path / "t"
    _seed(root)
    pristine = tree_digest(root)

    killed = _drive(root, tmp_env, "install", kill_at=f"{step}:{where}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    # Rollback straight after the kill: everything back, byte for byte.
    rb = _drive(root, tmp_env, "rollback")
    assert rb.returncode == 0, rb.stderr
    assert tree_digest(root) == pristine

    # Killed again, then resumed: the same result as an uninterrupted run.
    assert _drive(root, tmp_env, "install", kill_at=f"{step}:{where}").returncode == -signal.SIGKILL
    resumed = _drive(root, tmp_env, "install")
    assert resumed.returncode == 0, resumed.stderr
    assert tree_digest(root) == reference
    assert _drive(root, tmp_env, "rollback").returncode == 0
    assert tree_digest(root) == pristine


def test_concurrent_runs_refuse_or_wait_without_interleaving(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    root = tmp_path / "t"
    _seed(root)
    first = subprocess.Popen(
        [sys.executable, str(DRIVER), str(root), "install"],
        env=fault_env(tmp_env, stop_at="packages.install:middle"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Wait until the first run is stopped inside its second step, holding the lock.
        wait_stopped(first, "the first run at packages.install:middle")
        refused = _drive(root, tmp_env, "install")
        assert refused.returncode == 10  # ExitCode.LOCKED
        assert f"PID {first.pid}" in refused.stderr and "--wait" in refused.stderr

        waiter = subprocess.Popen(
            [sys.executable, str(DRIVER), str(root), "install", "--wait"],
            env=tmp_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=60) == 0
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 0, err
        # The waiter found the work done: it changed nothing.
        assert out.split() == [w for s in STEPS for w in (s, "done")]
    finally:
        if first.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
            first.kill()
    state = Path(tmp_env["TFGPU_STATE_DIR"])
    journal = Journal(next(state.glob("envs/*/journal.jsonl")))
    events = [(e.event, e.step) for e in journal.entries()]
    # one run, whole, then its end mark (#38 item 3: `envs` tells a killed run from an ended one)
    assert events == [("run", None)] + [(ev, s) for s in STEPS for ev in ("begin", "done")] + [("finished", None)]
    assert all(json.loads(line) for line in journal.path.read_text().splitlines())


@pytest.mark.parametrize("step", STEPS)
def test_rollback_killed_half_way_resumes(step: str, tmp_path: Path, tmp_env: dict[str, str]) -> None:
    root = tmp_path / "t"
    _seed(root)
    pristine = tree_digest(root)
    assert _drive(root, tmp_env, "install").returncode == 0
    killed = _drive(root, tmp_env, "rollback", kill_at=f"{step}:undo")
    assert killed.returncode == -signal.SIGKILL
    again = _drive(root, tmp_env, "rollback")
    assert again.returncode == 0, again.stderr
    assert tree_digest(root) == pristine
    # Every step undone exactly once across the two runs.
    state = Path(tmp_env["TFGPU_STATE_DIR"])
    journal = Journal(next(state.glob("envs/*/journal.jsonl")))
    undone = [e.step for e in journal.entries() if e.event == "undone"]
    assert sorted(undone) == sorted(STEPS)
