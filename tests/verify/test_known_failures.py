"""Issue 40's GPU-check part: the check names cuDNN >= 9.11 on cc < 7.5 and the Blackwell INVALID_PTX failure
from profiles/kernels.yaml's rows (passed in its plan), and its own copy (for runs without the package) is
held to those rows."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.support.stublibs import CHECK_SCRIPT
from tfgpu_install.context import build_context
from tfgpu_install.knowledge.load import load_kernels
from tfgpu_install.verify.gpucheck import tfgpucheck_known as known
from tfgpu_install.verify.host import CheckPlan, check_argv

_spec = importlib.util.spec_from_file_location("tfgpucheck_main_known", CHECK_SCRIPT)
assert _spec is not None and _spec.loader is not None
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

FLOOR_KEYS = ("library", "since", "min_cc", "last")
FAILURE_KEYS = ("id", "tensorflow", "cc_min", "cc_max", "unless_sass", "inferred")


def test_the_checks_own_copy_is_kernels_yaml() -> None:
    floors, failures = load_kernels()
    assert [{k: r[k] for k in FLOOR_KEYS} for r in known.FLOORS] == \
        [{k: asdict(r)[k] for k in FLOOR_KEYS} for r in floors]
    assert [{k: r[k] for k in FAILURE_KEYS} for r in known.KNOWN_FAILURES] == \
        [{k: asdict(r)[k] for k in FAILURE_KEYS} for r in failures]


def test_the_host_passes_the_knowledge_rows_in_the_plan(tmp_env: dict[str, str], tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    argv = check_argv(build_context(tmp_env), env, CheckPlan(cuda="12.3"))
    plan = json.loads(argv[argv.index("--plan-json") + 1])
    assert [r["id"] for r in plan["kernels"]["known_failures"]] == [r["id"] for r in known.KNOWN_FAILURES]
    assert plan["kernels"]["floors"][0]["since"] == "9.11"


@pytest.mark.parametrize("version,ccs,hit", [("9.11.0", ["6.1"], True), ("9.24.0", ["7.0", "9.0"], True),
                                             ("9.10.2", ["6.1"], False), ("9.11.0", ["7.5"], False)])
def test_the_floor(version: str, ccs: list[str], hit: bool) -> None:
    hits = known.floor_hits("cudnn", version, ccs)
    assert bool(hits) is hit
    if hit:
        assert hits[0]["gpus"] == [c for c in ccs if c < "7.5"]
        assert "9.10.2.21 is the last with them" in known.floor_words(hits[0], version)


def test_the_plans_rows_beat_the_copy() -> None:
    plan = {"kernels": {"floors": [dict(known.FLOORS[0], since="9.20")], "known_failures": []}}
    assert known.floor_hits("cudnn", "9.11.0", ["6.1"], plan) == []
    assert known.floor_hits("cudnn", "9.21.0", ["6.1"], plan)


@pytest.mark.parametrize("text,tf,cc,named", [
    ("E cuda_driver.cc] failed to load PTX: CUDA_ERROR_INVALID_PTX", "2.20.0", "12.0", "blackwell-ptx-jit"),
    ("LLVM ERROR: PTX version 8.5 does not support target 'sm_120'", "2.21.0", "12.0", "blackwell-ptx-jit"),
    ("CUDA_ERROR_INVALID_PTX", "2.19.0", "10.0", "blackwell-datacenter-ptx-jit"),
    ("CUDA_ERROR_INVALID_PTX", "2.22.0", "12.0", None),  # a release past the range
    ("CUDA_ERROR_INVALID_PTX", "2.20.0", "9.0", None),  # not a Blackwell GPU
    ("CUDA_ERROR_OUT_OF_MEMORY", "2.20.0", "12.0", None),  # not this failure
])
def test_the_tensorflow_layer_names_the_blackwell_ceiling(text: str, tf: str, cc: str, named: "str | None") -> None:
    state = {"devices": [{"index": 0, "compute_capability": cc}], "tf_measured": {"tensorflow": tf}}
    for plan in ({}, {"kernels": {"floors": [], "known_failures": [asdict(r) | {"sources": list(r.sources),
                                                                                "runs_instead": list(r.runs_instead)}
                                                                   for r in load_kernels()[1]]}}):
        hint = check.known_tf_failure(text, state, plan)
        if named is None:
            assert hint is None
        else:
            assert hint is not None and f"known failure {named} " in hint and "tensorflow/issues/111958" in hint
            assert f"on compute capability {cc}" in hint


def test_a_tensorflow_failing_with_invalid_ptx_on_blackwell_is_named_end_to_end(tmp_path: Path) -> None:
    """Through the check: a TensorFlow whose first GPU use dies with CUDA_ERROR_INVALID_PTX (a stand-in
    package that raises what TF 2.20 logs on an RTX 5080), on a GPU of compute capability 12.0."""
    from tests.support.stublibs import build_stub_libs, layer, plant_pci, run_check

    stubs = build_stub_libs(tmp_path / "stubs")
    fake = tmp_path / "site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX')\n")
    (tmp_path / "site" / "numpy").mkdir()
    (tmp_path / "site" / "numpy" / "__init__.py").write_text("")  # the layer imports numpy first
    plant_pci(tmp_path / "root", [("0000:01:00.0", "0x10de", "0x030000")])
    args = ["--root", str(tmp_path / "root"), "--layers", "driver,tensorflow", "--plan-json",
            json.dumps({"tensorflow": "2.20.0"})]
    for cc, named in (("12.0", True), ("8.9", False)):
        doc = run_check(args, {"LD_LIBRARY_PATH": str(stubs.driver), "STUB_CU_CC": cc,
                               "PYTHONPATH": str(tmp_path / "site")})
        tf = layer(doc, "tensorflow")
        assert tf["status"] == "fail" and "CUDA_ERROR_INVALID_PTX" in tf["summary"]
        assert ("known failure blackwell-ptx-jit" in tf["hint"]) is named, tf["hint"]
