"""profiles/matrix.yaml agrees with the facts read from the wheels (scripts/knowledge_facts.json).

Re-reading PyPI itself is opt-in and not a CI test: `python scripts/gather_knowledge.py --check`.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("gather_knowledge", ROOT / "scripts" / "gather_knowledge.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_matrix_matches_saved_wheel_facts(capsys: pytest.CaptureFixture[str]) -> None:
    mod = _script()
    rows = json.loads((ROOT / "scripts" / "knowledge_facts.json").read_text())
    assert len(rows) >= 71
    assert mod.check(rows) == 0, capsys.readouterr().out


def test_build_info_shapes() -> None:
    """The three shapes build_info.py has had (2.0-2.2 assignments, 2.3+ dict literals)."""
    mod = _script()
    old = "is_cuda_build = True\ncuda_version_number = '10.1'\ncudnn_version_number = '7'\n"
    assert mod.parse_build_info(old) == {"is_cuda_build": True, "cuda_version_number": "10.1",
                                         "cudnn_version_number": "7"}
    new = ("import collections\nbuild_info = collections.OrderedDict([('cuda_compute_capabilities', "
           "['sm_60', 'compute_90']), ('cuda_version', '12.5.1'), ('cudnn_version', '9')])\n")
    assert mod.parse_build_info(new)["cuda_compute_capabilities"] == ["sm_60", "compute_90"]
    win = "build_info = {'cuda_version': '64_101', 'cudnn_version': '64_7'}\n"
    assert mod.parse_build_info(win)["cuda_version"] == "64_101"


def test_fatbin_scan_reads_sass_and_ptx_entries() -> None:
    """A synthetic fat binary: header + one SASS (kind 2) entry for sm_70 + one PTX (kind 1) for 9.0."""
    import io
    import struct

    mod = _script()

    def entry(kind: int, arch: int, payload: bytes) -> bytes:
        head = struct.pack("<HHIQ", kind, 0, 64, len(payload)) + b"\0" * 12 + struct.pack("<I", arch)
        return head.ljust(64, b"\0") + payload

    body = entry(2, 70, b"x" * 100) + entry(1, 90, b"y" * 50)
    blob = b"junk" * 10 + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body + b"tail" * 20
    assert mod.scan_fatbins(io.BytesIO(blob)) == {"sass": [70], "ptx": [90]}
