"""The layer table (gpucheck/tfgpucheck_layers.py) is the one place a layer's name and order live."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tests.support.stublibs import CHECK_SCRIPT, run_check
from tfgpu_install.verify.gpucheck import tfgpucheck_layers as table
from tfgpu_install.verify.host import LAYER_NAMES, VerifyReport
from tfgpu_install.verify.hostcheck import HOST_LAYERS

PKG = Path(__file__).resolve().parents[2] / "tfgpu_install"


def _check_module():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(CHECK_SCRIPT.parent))
    import check  # type: ignore[import-not-found]

    return check


def test_every_layer_of_the_table_has_one_implementation() -> None:
    check = _check_module()
    args = argparse.Namespace(sgemm_size=8)
    impl = check.implementations(args, {}, {}, "/GPU:0", True, check.Seam(), check.Fd2Capture("/dev/null"), {})
    assert list(impl) == list(table.NAMES)
    assert LAYER_NAMES == table.NAMES
    assert HOST_LAYERS.split(",") == ["hardware", "driver", "cuda-runtime", "cudnn", "cublas"]


def test_selection_by_name_and_unknown_names() -> None:
    assert table.parse_selection("cudnn,driver") == {"cudnn", "driver"}
    assert table.parse_selection("2") == {"cuda-runtime"}
    for bad in ("gpu", "99"):
        try:
            table.parse_selection(bad)
        except KeyError as exc:
            assert "known: hardware, driver" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_no_layer_is_addressed_by_number_outside_the_table() -> None:
    """`.layer(<number>)`, `layer == N`, `num >= 5` and the old NAMES dict are gone from the package."""
    pattern = re.compile(r"\.layer\(\d|\blayer\"?\]? == \d|\bnum [<>]=? \d|NAMES = \{0:")
    hits = [f"{p.relative_to(PKG)}:{i}" for p in PKG.rglob("*.py") for i, line in
            enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


def test_report_reads_layers_by_name() -> None:
    report = VerifyReport.from_json({"ok": True, "layers": [{"layer": 1, "status": "pass", "summary": "ok"}]})
    lay = report.layer("driver")
    assert lay is not None and lay.name == "driver" and report.layer("cudnn") is None


def test_the_old_test_switch_is_an_ordinary_variable_now(tmp_path: Path) -> None:
    """TFGPU_CHECK_TEST_DEVICE set by a user must not move the TensorFlow layers off the GPU."""
    doc = run_check(["--root", str(tmp_path), "--layers", "tensorflow"],
                    env={"TFGPU_CHECK_TEST_DEVICE": "/CPU:0"})
    assert doc["device"] == "/GPU:0"
    assert doc["layers"][0]["name"] == "tensorflow" and doc["layers"][0]["status"] == "fail"
