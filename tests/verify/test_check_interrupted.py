"""Issue 25 defect 5: a stage timeout (SIGTERM to `tfgpu-install verify`) must not leave the check
running on the GPU: the check runs in a session of its own, so the tool ends that group itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.stublibs import StubLibs, plant_pci


def _checks_under(marker: str) -> list[int]:
    """Pids of check.py processes whose command line names `marker` (this test's own root)."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(c.endswith(b"check.py") for c in cmd) and marker.encode() in cmd:
            out.append(int(pid))
    return out


def _maps_libcuda(pid: int) -> bool:
    try:
        return "libcuda.so.1" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _wait_for(cond, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return bool(cond())


def test_sigterm_to_the_tool_ends_the_check_it_started(tmp_path: Path, stubs: StubLibs) -> None:
    root = tmp_path / "root"
    plant_pci(root, [("0000:19:00.0", "0x10de", "0x030200")])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TFGPU_ROOT": str(root),
           "TFGPU_STATE_DIR": str(tmp_path / "state"), "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
           "TFGPU_DATA_DIR": str(tmp_path / "data"), "LD_LIBRARY_PATH": str(stubs.driver),
           "STUB_CU_INIT_HANG": "1"}  # cuInit never returns: a wedged driver
    tool = subprocess.Popen([sys.executable, "-m", "tfgpu_install", "verify", "--host-only", "--json",
                             "--timeout", "300"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    left: list[int] = []
    try:
        # Until the check sits in cuInit (libcuda mapped, its progress lines written).
        assert _wait_for(lambda: any(_maps_libcuda(pid) for pid in _checks_under(str(root))), 60), \
            "the check never reached the driver"
        tool.send_signal(signal.SIGTERM)  # what `timeout` sends when a stage runs out of time
        out, err = tool.communicate(timeout=60)
        assert tool.returncode != 0
        _wait_for(lambda: not _checks_under(str(root)), 10)
        left = _checks_under(str(root))
        assert left == [], "check.py is still running after the tool was terminated"
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.communicate()
        for pid in _checks_under(str(root)):  # only the check this test started (its own root)
            os.kill(pid, signal.SIGKILL)
