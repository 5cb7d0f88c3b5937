"""Fault injection for tests: arm the package's test seam (tfgpu_install.context.ARMED_HOOKS).

In-process: `with armed(fail_at="packages.install:middle:enospc"): main([...])`.
In a process the test starts (the CLI, tests/support/engine.py): `fault_env(env, kill_at=...)` adds
TFGPU_TEST_KILL_AT / _STOP_AT / _FAIL_AT and puts tests/support/faultsite first on PYTHONPATH;
its sitecustomize.py arms the hooks at start-up. Only the test suite reads those variables: the
package itself never looks at them, so a user's environment cannot weaken or kill a real run.
"""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Optional

from tfgpu_install import context

SITE = Path(__file__).resolve().parent / "faultsite"
VARS = {"kill_at": "TFGPU_TEST_KILL_AT", "stop_at": "TFGPU_TEST_STOP_AT", "fail_at": "TFGPU_TEST_FAIL_AT"}


@contextmanager
def armed(kill_at: Optional[str] = None, stop_at: Optional[str] = None,
          fail_at: Optional[str] = None) -> Iterator[context.Hooks]:
    """Every context built inside the block starts with these hooks."""
    before = context.ARMED_HOOKS
    context.ARMED_HOOKS = hooks = context.Hooks(kill_at=kill_at, stop_at=stop_at, fail_at=fail_at)
    try:
        yield hooks
    finally:
        context.ARMED_HOOKS = before


def fault_env(env: Mapping[str, str], kill_at: Optional[str] = None, stop_at: Optional[str] = None,
              fail_at: Optional[str] = None) -> dict[str, str]:
    """`env` for a process that arms these faults at start-up."""
    out = dict(env)
    for field, value in (("kill_at", kill_at), ("stop_at", stop_at), ("fail_at", fail_at)):
        if value:
            out[VARS[field]] = value
    out["PYTHONPATH"] = os.pathsep.join([str(SITE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return out


def wait_stopped(proc: "subprocess.Popen[str]", what: str, limit_s: float = 1800) -> None:
    """Wait until `proc` has stopped itself (a stop_at fault, state T). Fails the test, with the
    process's stderr, if it ends instead. The bound is a hang guard, not a timing: under the whole
    suite on a loaded machine an install took more than the 2 minutes this waited before (#43)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"{what}: the process ended (exit {proc.returncode}) instead of stopping: "
                                 f"{err[-2000:]}")
        try:
            with open(f"/proc/{proc.pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "T":
                    return
        except OSError:  # gone between poll() and open(): poll() says so next time
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what}: the process never stopped")


def stopped_at_seam() -> list[int]:
    """Every process on this machine that stopped itself at the stop seam (state T, TFGPU_TEST_STOP_AT in its
    environment), in any namespace: the demos' tools run on their hosts and nodes."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
            if state == "T" and f"{VARS['stop_at']}=".encode() in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found
