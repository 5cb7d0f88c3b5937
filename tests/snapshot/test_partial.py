"""snapshot/partial.py: a killed `snapshot image` / `snapshot bundle` does not leave its build dir for
ever (issue #39 item 19). The broken version: a build dir made with mkdtemp and removed only by the
process's own except clause, which a SIGKILL never runs.

Real processes: a child enters the build and SIGKILLs itself; another holds its build open while
the test sweeps (it must survive: a live build is never removed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tfgpu_install.snapshot.partial import building, sweep

_CHILD = """
import os, signal, sys, time
from pathlib import Path
from tfgpu_install.snapshot.partial import building
with building(Path(sys.argv[1])) as tmp:
    (tmp / "wheels").mkdir()
    (tmp / "wheels" / "big.whl").write_bytes(b"x" * 1000)
    print(tmp, flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()  # hold the build open until the test closes stdin
"""


def _child(out: Path, how: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(out), how], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_build_is_removed_by_the_next_and_a_live_one_is_not(tmp_path: Path) -> None:
    out = tmp_path / "image"
    dead, dead_dir = _child(out, "kill")
    assert dead.wait(30) == -signal.SIGKILL
    assert dead_dir.is_dir() and (dead_dir / "wheels" / "big.whl").is_file()  # what a kill left
    live, live_dir = _child(out, "hold")
    try:
        with building(out) as tmp:
            assert tmp.is_dir()
            assert not dead_dir.exists() and not Path(str(dead_dir) + ".lock").exists()
            assert live_dir.is_dir()  # another run still building: kept
            os.replace(tmp, out)
        assert out.is_dir()
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait(30)
    assert not live_dir.exists()  # its own `with` removed it (never renamed)
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["image"], leftovers


def test_only_our_own_build_dirs_are_swept(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    theirs = tmp_path / ".bundle.partial-someone"  # another user's, same name shape: never ours to remove
    theirs.mkdir()
    os.chown(theirs, 65534, 65534) if os.geteuid() == 0 else None
    unrelated = tmp_path / ".other.partial-xyz"  # no lock file of ours beside it: not known to be ours
    unrelated.mkdir()
    linked = tmp_path / ".bundle.partial-link"  # a link is never followed
    target = tmp_path / "keep"
    target.mkdir()
    (target / "f").write_text("x")
    linked.symlink_to(target)
    old = tmp_path / ".bundle.partial-0ld"  # ours, from before the lock files (or killed before its lock)
    old.mkdir()
    removed = sweep(out)
    assert removed == [old]
    assert unrelated.is_dir() and (target / "f").is_file() and linked.is_symlink()
    assert theirs.is_dir() or os.geteuid() != 0


def test_an_error_removes_the_build_and_its_lock(tmp_path: Path) -> None:
    out = tmp_path / "image"
    try:
        with building(out) as tmp:
            (tmp / "x").write_text("half")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert list(tmp_path.iterdir()) == []
