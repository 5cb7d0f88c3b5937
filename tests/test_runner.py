"""The real runner against real children: a timeout ends the whole process group, never hangs us."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tfgpu_install.runner import NOT_FOUND, TIMED_OUT, Completed, SubprocessRunner

# A child that ignores SIGTERM and starts a grandchild holding the child's stdout/stderr; `detach`
# puts the grandchild in its own session (out of the child's process group), as a daemonising
# helper does. Both pids go to a file so the test can check them, and clean up after itself.
CHILD = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session={detach})
open(sys.argv[1], "w").write(f"{{os.getpid()}} {{grand.pid}}")
print("started", flush=True)
time.sleep(600)
"""
HANG_GUARD = 120  # a runner that hangs would sit here for the grandchild's 600 s


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in fh)
    except OSError:
        return False


def _ends(pid: int) -> bool:
    """True once pid has ended: a killed process needs a moment to finish exiting (bounded, not timed)."""
    for _ in range(200):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _run_guarded(runner: SubprocessRunner, argv: list[str], timeout: float) -> Completed:
    """runner.run in a thread: a hang fails the test instead of stalling the suite."""
    box: list[Completed] = []
    t = threading.Thread(target=lambda: box.append(runner.run(argv, desc="stubborn child", timeout=timeout)),
                         daemon=True)
    t.start()
    t.join(HANG_GUARD)
    assert not t.is_alive(), "the runner hung after the timeout (it waited on the pipes without a limit)"
    return box[0]


def _pids(path: Path) -> list[int]:
    for _ in range(200):  # the child writes its file right after starting
        if path.is_file() and path.read_text().strip():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the child never started")


@pytest.fixture
def cleanup() -> list[int]:
    pids: list[int] = []
    yield pids
    for pid in pids:  # only the processes this test started, by id
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _stubborn(tmp_path: Path, cleanup: list[int], detach: bool) -> tuple[Completed, int, int]:
    pidfile = tmp_path / "pids"
    argv = [sys.executable, "-c", CHILD.format(detach=detach), str(pidfile)]
    runner = SubprocessRunner()
    runner.term_grace, runner.kill_grace = 0.5, 1.0  # bounded waits, short for the test
    done = _run_guarded(runner, argv, timeout=1.0)
    child, grand = _pids(pidfile)
    cleanup += [child, grand]
    assert done.returncode == TIMED_OUT and "timed out after 1.0s: stubborn child" in done.stderr
    return done, child, grand


def test_timeout_kills_the_whole_group_including_a_sigterm_ignoring_child(tmp_path: Path,
                                                                          cleanup: list[int]) -> None:
    done, child, grand = _stubborn(tmp_path, cleanup, detach=False)
    assert "started" in done.stdout  # what it printed before the timeout is kept
    assert _ends(child) and _ends(grand)  # killpg: the grandchild went with its group


def test_a_detached_grandchild_holding_the_pipe_is_reported_not_waited_for(tmp_path: Path,
                                                                          cleanup: list[int]) -> None:
    done, child, grand = _stubborn(tmp_path, cleanup, detach=True)
    assert _ends(child)
    assert _alive(grand)  # out of our group: not ours to kill, but no longer waited for
    assert "still holds its output" in done.stderr and "started" in done.stdout


def test_plain_runs_and_missing_programs(tmp_path: Path) -> None:
    r = SubprocessRunner()
    done = r.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"], input="hi")
    assert (done.returncode, done.stdout.strip()) == (3, "HI")
    assert r.run([str(tmp_path / "nope")]).returncode == NOT_FOUND


FREEZER = Path("/sys/fs/cgroup/freezer")


def _freezer_usable() -> bool:
    return (FREEZER / "cgroup.procs").is_file() and os.access(FREEZER, os.W_OK)


@pytest.mark.skipif(not _freezer_usable(), reason="needs a writable cgroup v1 freezer (root)")
def test_a_child_that_survives_sigkill_is_reported_and_left(tmp_path: Path) -> None:
    # A frozen task cannot act on SIGKILL until thawed: from our side exactly a child stuck in a hung
    # driver (uninterruptible sleep). The runner must give up after its bounded waits and say so.
    group = FREEZER / f"tfgpu-test-{os.getpid()}"
    group.mkdir()
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; echo $$ > {group}/cgroup.procs; echo FROZEN > {group}/freezer.state; sleep 600"
    runner = SubprocessRunner()
    runner.term_grace, runner.kill_grace = 0.5, 1.0
    try:
        done = _run_guarded(runner, ["sh", "-c", script], timeout=1.0)
        pid = _pids(pidfile)[0]
        assert done.returncode == TIMED_OUT
        assert f"pid {pid} survived SIGKILL" in done.stderr and "hung driver" in done.stderr
        assert _alive(pid)
    finally:
        (group / "freezer.state").write_text("THAWED\n")  # the queued SIGKILL now ends it
        for _ in range(200):
            if not (group / "cgroup.procs").read_text().strip():
                break
            time.sleep(0.05)
        group.rmdir()
