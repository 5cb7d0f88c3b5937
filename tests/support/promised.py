"""What CI promises: gcc, ldconfig, uv, the package registry, and every system tool a test needs
(.ci/run installs them and runs with CI=true).

Outside CI a test that needs a missing one skips, saying why (`-ra` prints the reason in the
summary). Under CI=true such a skip is a failure: a skip there would hide that the suite did not
test what it claims to. Two forms:
- absent(tool): for skipif on the tools CI promises outright (gcc, ldconfig): under CI the test runs
  and fails on the missing tool;
- needs_tool / require_tool: a skip whose reason starts with MISSING_TOOL; tests/conftest.py turns
  such a skip into a failure under CI (also from inside a fixture, where a skipif cannot reach)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn, Optional

import pytest

CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
MISSING_TOOL = "missing system tool"
# Where a distribution keeps administration tools that a plain user's PATH (/usr/bin:/bin) leaves out;
# the tool itself looks there for ldconfig (steps/ldconfig.py), so the tests do too.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_tool(tool: str, *also: str, sbin: bool = False) -> Optional[str]:
    """`tool` on PATH, else (sbin) in the sbin dirs, else the first of `also` that exists; None when none."""
    found = shutil.which(tool) or (shutil.which(tool, path=os.pathsep.join(SBIN)) if sbin else None)
    return found or next((p for p in also if Path(p).exists()), None)


def absent(tool: str, *also: str) -> bool:
    """For skipif: `tool` is on neither PATH, the sbin dirs nor the given paths, and this is not CI
    (where the test then runs and fails on the missing tool)."""
    return find_tool(tool, *also, sbin=True) is None and not CI


def missing_reason(tool: str, why: str) -> str:
    return f"{MISSING_TOOL} {tool}: {why}"


def needs_tool(tool: str, why: str, *also: str) -> pytest.MarkDecorator:
    """skipif `tool` is missing (PATH, or one of `also`), with a reason CI turns into a failure."""
    return pytest.mark.skipif(find_tool(tool, *also) is None, reason=missing_reason(tool, why))


def require_tool(tool: str, why: str, *also: str) -> str:
    """The tool's path, or a skip (a failure under CI) saying which tool is missing and what for."""
    found = find_tool(tool, *also)
    if found is None:
        pytest.skip(missing_reason(tool, why))
    return found


def skip_or_fail(reason: str) -> NoReturn:
    """A promised resource is not there at run time (an install from the registry failed)."""
    if CI:
        pytest.fail(f"CI promises this, and it failed: {reason}", pytrace=False)
    pytest.skip(reason)
