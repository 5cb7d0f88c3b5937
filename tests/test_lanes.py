"""The test lanes: `scripts/test --fast` runs `-m "not e2e"`; tests/conftest.py puts every test that takes a
provisioning fixture in the e2e lane. These hold the far ends: a renamed fixture, a dropped hook or a script
that stops passing the marker would quietly put minutes of real installs back into the fast lane."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROVISIONING_FIXTURES

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def _fixtures_defined() -> set[str]:
    names: set[str] = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
                names.add(node.name)
    return names


def test_every_provisioning_fixture_exists() -> None:
    assert sorted(PROVISIONING_FIXTURES - _fixtures_defined()) == []


def test_a_test_on_a_provisioning_fixture_is_in_the_e2e_lane_and_a_pure_one_is_not() -> None:
    # test_install.py's tests take `index` (a served local index) except the pure ones
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "e2e",
         "tests/commands/test_install.py", "tests/resolver/test_resolver_shapes.py"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    ).stdout
    assert "tests/commands/test_install.py::test_install_noop_status_rollback" in out
    assert "test_resolver_shapes.py" not in out


def test_scripts_test_fast_deselects_e2e() -> None:
    script = (REPO / "scripts" / "test").read_text()
    assert '-m "not e2e"' in script or "-m 'not e2e'" in script


def test_every_test_module_has_its_own_basename() -> None:
    # tests/ has no __init__.py files: pytest imports each module by its basename, so two files of one
    # name in two folders stop the whole collection ("import file mismatch")
    seen: dict[str, Path] = {}
    twice = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path.name in seen:
            twice.append(f"{seen[path.name].relative_to(TESTS)} and {path.relative_to(TESTS)}")
        seen.setdefault(path.name, path)
    assert twice == []
