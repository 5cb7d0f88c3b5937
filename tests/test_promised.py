"""A test skipped for a missing system tool: outside CI a skip whose reason (which tool, what for) is in
the summary; under CI=true (.ci/run) a failure, also from inside a fixture. Run as a real pytest on a
small test module with the suite's conftest; a skip for another reason stays a skip under CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MODULE = '''
import pytest
from tests.support.promised import needs_tool, require_tool

@pytest.fixture
def gone():
    return require_tool("tfgpu-no-such-tool", "the fixture runs it")

@needs_tool("tfgpu-no-such-tool", "the test runs it")
def test_marked():
    pass

def test_fixture(gone):
    pass

def test_present():
    assert require_tool("sh", "a control: the test runs it")

def test_other_reason():
    pytest.skip("not on this platform")
'''


def _pytest(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tools_here.py").write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           "-p", "tests.conftest", "--rootdir", str(tmp_path), str(tmp_path / "test_tools_here.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_outside_ci_a_missing_tool_is_a_skip_that_says_which(tmp_path: Path) -> None:
    done = _pytest(tmp_path, ci=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "missing system tool tfgpu-no-such-tool: the test runs it" in done.stdout
    assert "missing system tool tfgpu-no-such-tool: the fixture runs it" in done.stdout
    assert "1 passed, 3 skipped" in done.stdout


def test_under_ci_a_missing_tool_fails_and_another_skip_stays(tmp_path: Path) -> None:
    done = _pytest(tmp_path, ci=True)
    assert done.returncode == 1, done.stdout[-3000:]
    out = done.stdout
    assert "CI promises every system tool the tests use" in out
    assert "1 passed, 1 skipped, 2 errors" in out, out[-1500:]  # both in set-up: a skipif and a fixture
    assert "SKIPPED" in out and "not on this platform" in out
