"""No shipped module reads a test switch: a variable a user could set must not change what the tool does
(issue 30). Tests arm their faults through tests/support/faults.py instead."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tfgpu_install"
SWITCH = re.compile(r"""["'](\w*_TEST_\w*|TFGPU_TEST\w*)["']""")
NOT_YET: set[str] = set()  # h25 removed the GPU check's CPU stand-in switch (check.Seam instead)


def test_no_shipped_module_names_a_test_variable() -> None:
    found = [(str(p.relative_to(PACKAGE)), m.group(1)) for p in sorted(PACKAGE.rglob("*.py"))
             for m in SWITCH.finditer(p.read_text()) if m.group(1) not in NOT_YET]
    assert found == []


def test_the_scan_sees_a_switch() -> None:
    assert SWITCH.findall('env.get("TFGPU_TEST_KILL_AT")') == ["TFGPU_TEST_KILL_AT"]
    assert SWITCH.findall("os.environ['SOME_TEST_FLAG']") == ["SOME_TEST_FLAG"]
