"""The GPU check's report types (gpucheck/tfgpucheck_report.py) hold the report it prints: every key of
a real run's document, at every depth, is declared there with the type its value has, and every
required key is present. mypy holds the code to the types; this holds the types to the document (a key
a layer wrote that the types do not declare, or a value of another type, fails here).

Also the plan the check is given (`read_plan`): typed once, the report still echoing it as given."""

from __future__ import annotations

import importlib.util
import json
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest

from tests.support.stublibs import StubLibs, layer, plant_pci, run_check
from tfgpu_install.verify.gpucheck import tfgpucheck_report as types
from tfgpu_install.verify.host import CHECK_SCRIPT

_spec = importlib.util.spec_from_file_location("tfgpucheck_main_types", CHECK_SCRIPT)
assert _spec is not None and _spec.loader is not None
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

H200 = ("0000:19:00.0", "0x10de", "0x030200")
SECOND = ("0000:2a:00.0", "0x10de", "0x030200")
DRIVER = {"STUB_CU_DRIVER_VERSION": "13000", "STUB_CU_CC": "9.0", "STUB_CUBLAS_SGEMM_US": "2000",
          "STUB_CU_DEVICES": "2", "STUB_CU_PCI": "0000:19:00.0,0000:2a:00.0"}
BURN = ("--sgemm-burn", "1", "--sgemm-burn-size", "64", "--sample-interval", "0.1")


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def misfits(value: object, tp: Any, where: str = "report") -> list[str]:
    """Where `value` does not fit the type `tp` (a TypedDict: no undeclared key, every required one)."""
    if tp is Any or tp is object:
        return []
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not {tp.__name__}"]
        hints = get_type_hints(tp)
        out = [f"{where}.{k}: not declared in {tp.__name__}" for k in value if k not in hints]
        out += [f"{where}.{k}: required by {tp.__name__}, missing" for k in tp.__required_keys__ if k not in value]
        for k, v in value.items():
            if k in hints:
                out += misfits(v, hints[k], f"{where}.{k}")
        return out
    origin = get_origin(tp)
    if origin is Union:
        tries = [misfits(value, arm, where) for arm in get_args(tp)]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [m for i, v in enumerate(value) for m in misfits(v, get_args(tp)[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [m for k, v in value.items() for m in misfits(v, get_args(tp)[1], f"{where}.{k}")]
    if origin is not None and origin.__module__ == "collections.abc":  # Callable: not in a report
        return [f"{where}: a {tp} in a printed document"]
    if tp is type(None):
        return [] if value is None else [f"{where}: {value!r}, not None"]
    if tp is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{where}: {value!r}"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{where}: {value!r}, not int"]
    return [] if isinstance(value, tp) else [f"{where}: {value!r}, not {tp.__name__}"]


@pytest.fixture
def two_gpus(tmp_path: Path) -> Path:
    plant_pci(tmp_path / "root", [H200, SECOND])
    return tmp_path / "root"


def _plan(stubs: StubLibs) -> dict[str, Any]:
    return {"cuda": "13.0", "cudnn": "9.13", "lib_dirs": [str(stubs.cudnn_cu13), str(stubs.cu13)],
            "mine": {"any": ["thing"]}, "kernels": {"floors": [], "known_failures": []}}


def _run(root: Path, stubs: StubLibs, *extra: str, **stub: str) -> dict[str, Any]:
    plan = _plan(stubs)
    env = {"LD_LIBRARY_PATH": str(stubs.driver), **DRIVER, **stub}
    doc = run_check(["--root", str(root), "--layers", "hardware,driver,cuda-runtime,cudnn,cublas",
                     "--plan-json", json.dumps(plan), *extra], env)
    doc.pop("_stderr")  # run_check's own addition
    return doc


def test_a_passing_run_with_the_burn_fits_the_report_types(two_gpus: Path, stubs: StubLibs) -> None:
    doc = _run(two_gpus, stubs, *BURN, STUB_NVML_TEMP="86")
    assert doc["ok"] is True, doc["first_failure"]
    assert layer(doc, "benchmark")["measured"]["burns"][1]["telemetry"]["series"]  # the deep parts are there
    assert misfits(doc, types.Report) == []
    assert doc["plan"] == {k: v for k, v in _plan(stubs).items() if k != "kernels"}  # as given, less the rows


def test_failing_runs_fit_the_report_types(two_gpus: Path, stubs: StubLibs) -> None:
    wrong = _run(two_gpus, stubs, *BURN, "--keep-going", STUB_CUBLAS_WRONG_AT="23")
    conv = _run(two_gpus, stubs, STUB_CUDNN_CONV_ERROR="1:5000")
    sick = _run(two_gpus, stubs, STUB_NVML_REMAP_PENDING="1", STUB_NVML_ECC_UNCORRECTED="2")
    for doc in (wrong, conv, sick):
        assert doc["ok"] is False and doc["first_failure"] is not None
        assert misfits(doc, types.Report) == []


def test_the_fit_sees_an_undeclared_key_a_wrong_value_and_a_missing_key() -> None:
    entry = {"layer": 1, "name": "driver", "status": "pass", "summary": "", "measured": {"devices": [{"index": 0}]},
             "error": None, "hint": None}
    assert misfits(entry, types.LayerEntry) == []  # the sane control
    assert misfits({**entry, "measured": {"devices": [{"index": 0, "speed": 1}]}}, types.LayerEntry) == [
        "report.measured.devices[0].speed: not declared in DeviceEntry"]
    assert misfits({**entry, "hint": 3}, types.LayerEntry) == ["report.hint: 3, not str"]
    assert misfits({k: v for k, v in entry.items() if k != "summary"}, types.LayerEntry) == [
        "report.summary: required by LayerEntry, missing"]


def test_the_plan_is_typed_once_and_echoed_as_given() -> None:
    given = {"cuda": "12.3", "cudnn": 9, "tensorflow": None, "lib_dirs": ["/a", 7], "site_dirs": "/not/a/list",
             "libcuda": ["x"], "kernels": {"floors": []}, "mine": {"a": 1}}
    assert check.read_plan(given) == {"cuda": "12.3", "cudnn": "9", "tensorflow": None, "lib_dirs": ["/a", "7"],
                                      "kernels": {"floors": []}}
    assert check.read_plan(["not", "a", "plan"]) == {}
    hints = typing.get_type_hints(types.CheckPlan)
    assert set(check.read_plan({k: "1" for k in hints})) <= set(hints)
