"""Shared test fixtures: a Context pointed at temp dirs, and the recorded real outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.support.promised import CI, MISSING_TOOL
from tfgpu_install.context import Context, build_context

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
# Real outputs captured from public reports (copied from ../shared/fixtures; see its README).
SHARED_FIXTURES = FIXTURES / "shared"


def load_cases(kind_dir: str) -> list[dict[str, Any]]:
    """Every case file under tests/fixtures/shared/<kind_dir>/, parsed."""
    cases = []
    for path in sorted((SHARED_FIXTURES / kind_dir).glob("*.yaml")):
        with open(path) as fh:
            cases.append(yaml.safe_load(fh))
    return cases


def make_tmp_env(base: Path) -> dict[str, str]:
    """A process environment whose state/cache/data dirs and system root are dirs under `base`."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base / "home"),
        "TFGPU_ROOT": str(base / "root"),
        "TFGPU_STATE_DIR": str(base / "state"),
        "TFGPU_CACHE_DIR": str(base / "cache"),
        "TFGPU_DATA_DIR": str(base / "data"),
    }
    for name in ("home", "root", "state", "cache", "data"):
        (base / name).mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture
def tmp_env(tmp_path: Path) -> dict[str, str]:
    return make_tmp_env(tmp_path)


@pytest.fixture
def ctx(tmp_env: dict[str, str]) -> Iterator[Context]:
    """A real Context (real SubprocessRunner) confined to temp dirs."""
    yield build_context(tmp_env)


# The fixtures that provision a real env (a venv built by the real install from a local index of real
# wheels) or serve the index such an install reads: a test taking one of them is end-to-end. Marking by
# fixture rather than by hand means a new test on these fixtures joins the e2e lane by itself;
# tests/test_lanes.py holds the names to fixtures that exist.
PROVISIONING_FIXTURES = frozenset({
    "index", "served_index", "package_index", "wheelhouse",  # local package indexes of real wheels
    "source_env", "with_env", "two_envs", "exported", "tf_env",  # envs built by a real install
    "reference",  # test_install_faults / test_faults: an uninterrupted install to compare with
})


def is_e2e(item: pytest.Item) -> bool:
    """A test in the e2e lane: marked e2e (or slow: the real registry; or fleet: namespaces + sshd), or
    taking a provisioning fixture."""
    if any(m in item.keywords for m in ("e2e", "slow", "fleet")):
        return True
    return bool(PROVISIONING_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every e2e test carries the `e2e` marker (`scripts/test --fast` runs `-m "not e2e"`);
    TFGPU_SKIP_SLOW=1 leaves out the tests marked slow (real registry installs, real TF)."""
    for item in items:
        if "e2e" not in item.keywords and is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    if not os.environ.get("TFGPU_SKIP_SLOW"):
        return
    skip = pytest.mark.skip(reason="TFGPU_SKIP_SLOW is set")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI (.ci/run, CI=true) a test skipped for a missing system tool fails: CI installs every
    tool the suite uses, so such a skip means the suite did not test what it claims to. Elsewhere the
    skip stands, its reason in the summary (-ra)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not (CI and report.skipped and isinstance(report.longrepr, tuple)):
        return
    reason = str(report.longrepr[2])
    if MISSING_TOOL in reason:
        report.outcome = "failed"
        report.longrepr = f"CI promises every system tool the tests use, and this one is not there: {reason}"
