"""What CI promises: gcc, ldconfig, uv and the package registry (.ci/run runs with CI=true).

Outside CI a test that needs a missing one skips, saying why. Under CI=true it runs (or fails at
once with the reason): a skip there would hide that the suite did not test what it claims to."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def absent(tool: str, *also: str) -> bool:
    """For skipif: `tool` is on neither PATH nor the given paths, and this is not CI (where the
    test then runs and fails on the missing tool)."""
    found = shutil.which(tool) is not None or any(Path(p).exists() for p in also)
    return not found and not CI


def skip_or_fail(reason: str) -> NoReturn:
    """A promised resource is not there at run time (an install from the registry failed)."""
    if CI:
        pytest.fail(f"CI promises this, and it failed: {reason}", pytrace=False)
    pytest.skip(reason)
