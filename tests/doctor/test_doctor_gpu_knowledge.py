"""Issue 40, the doctor's part: it names cuDNN >= 9.11 on a GPU below compute capability 7.5, and a
TensorFlow release known to fail on Blackwell, from the rows of profiles/kernels.yaml (the resolver's rows,
looked up through knowledge/gpu_rules.py), in a pasted log and on the machine walk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.knowledge.test_gpu_family_addition import site
from tests.support.doctor_layouts import fake_tf_env, make_ctx, plant_driver_ok, recorded_smi, replay
from tfgpu_install.cli import main
from tfgpu_install.doctor.chain import walk
from tfgpu_install.doctor.classify import classify
from tfgpu_install.doctor.gpuknowledge import KernelRows
from tfgpu_install.doctor.kernel_check import NAME
from tfgpu_install.doctor.rules import load_rules
from tfgpu_install.knowledge.load import load_knowledge

RULES = load_rules()
KN = load_knowledge()
ROWS = KernelRows(KN.floors, KN.known_failures)
SMI_OK = recorded_smi("case_027")
BLACKWELL = yaml.safe_load((FIXTURES / "logs-kinds" / "kind_blackwell_ptx85_sm120.yaml").read_text())["verbatim"]
# Composed from real line formats (TF's cuda_dnn.cc "Loaded cuDNN version", gpu_device.cc's device line, the
# cuDNN failure TF raises): no public log of cuDNN 9.11 on a Pascal GPU under TF was found.
FLOOR_LOG = ("I0000 00:00:1755011248.049012 142 cuda_dnn.cc:529] Loaded cuDNN version {v}\n"
             "I0000 00:00:1755011248.049900 142 gpu_device.cc:2020] Created device /job:localhost/replica:0/task:0/"
             "device:GPU:0 with 5563 MB memory:  -> device: 0, name: NVIDIA GeForce GTX 1060 6GB, pci bus id: "
             "0000:01:00.0, compute capability: {cc}\n"
             "tensorflow.python.framework.errors_impl.UnknownError: Failed to get convolution algorithm. This is "
             "probably because cuDNN failed to initialize, so try looking to see if a warning log message was "
             "printed above.\n")


def test_a_blackwell_ptx_abort_names_the_known_failure_row() -> None:
    d = classify(BLACKWELL, RULES, ROWS)
    assert d.primary is not None and d.primary.rule_id == "ptx-isa-too-old-for-gpu"
    assert "blackwell-ptx-jit" in d.primary.knowledge and "compute capability 12.0" in d.primary.cause
    assert "NGC" in d.primary.fix or "container" in d.primary.fix  # the row's runs_instead
    plain = classify(BLACKWELL, RULES)  # control: without the rows, the rule's own words
    assert plain.primary is not None and not plain.primary.knowledge


def test_invalid_ptx_with_release_and_gpu_names_the_row() -> None:
    # Real lines (tensorflow/tensorflow#99592, #89272), joined: the release, the GPU, the failing load.
    log = ("TensorFlow version: 2.20.0\n"
           "W0000 00:00:1755011248.049012     142 gpu_device.cc:2447] TensorFlow was not built with CUDA kernel "
           "binaries compatible with compute capability 12.0. CUDA kernels will be jit-compiled from PTX, which "
           "could take 30 minutes or longer.\n"
           "W tensorflow/compiler/mlir/tools/kernel_gen/tf_gpu_runtime_wrappers.cc:40] 'cuModuleLoadData(&module, "
           "data)' failed with 'CUDA_ERROR_INVALID_PTX'\n")
    d = classify(log, RULES, ROWS)
    assert d.primary is not None and "blackwell-ptx-jit" in d.primary.knowledge
    assert "TensorFlow 2.20.0 on compute capability 12.0" in d.primary.cause
    later = classify(log.replace("2.20.0", "2.22.0"), RULES, ROWS)  # control: a release the row does not hold
    assert later.primary is not None and not later.primary.knowledge


@pytest.mark.parametrize("version, cc, named", [("91100", "6.1", True), ("91000", "6.1", False),
                                                ("91100", "9.0", False)])
def test_cudnn_floor_is_named_only_below_it(version: str, cc: str, named: bool) -> None:
    d = classify(FLOOR_LOG.format(v=version, cc=cc), RULES, ROWS)
    assert d.primary is not None and d.primary.rule_id == "cudnn-init-failed"
    assert bool(d.primary.knowledge) == named
    if named:
        assert "cuDNN 9.11.0 has no kernels for this GPU (compute capability 6.1)" in d.primary.cause
        assert "9.10.2.21" in d.primary.fix


def _walk(tmp_env: dict[str, str], tmp_path: Path, cc: str, **env_kw: Any) -> dict[str, Any]:
    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    env = fake_tf_env(tmp_path / "env", **env_kw)
    query = f"0, NVIDIA GPU, GPU-95ef7c5d-fc11-835b-cd38-2020193cf8e0, 00000000:01:00.0, 575.51.02, {cc}, 24564\n"
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, query=query, python=str(env / "bin/python"))), RULES, str(env), ROWS)
    return {"checks": [c for c in rep.checks if c.name == NAME], "broken": rep.broken}


def test_machine_pascal_with_cudnn_911(tmp_env: dict[str, str], tmp_path: Path) -> None:
    got = _walk(tmp_env, tmp_path, "6.1", cudnn="9.11.0.98")
    assert [c.layer for c in got["checks"]] == ["cudnn"] and got["broken"] is got["checks"][0]
    assert "nvidia-cudnn-cu12==9.10.2.21" in got["broken"].fix


def test_machine_pascal_with_cudnn_910_is_fine(tmp_env: dict[str, str], tmp_path: Path) -> None:
    assert _walk(tmp_env, tmp_path, "6.1", cudnn="9.10.2.21")["checks"] == []


def test_machine_blackwell_with_tf_220(tmp_env: dict[str, str], tmp_path: Path) -> None:
    got = _walk(tmp_env, tmp_path, "12.0", version="2.20.0", cudnn="9.3.0.75")
    assert [c.layer for c in got["checks"]] == ["execution"]
    assert "blackwell-ptx-jit" in got["checks"][0].cause and got["broken"] is got["checks"][0]


def test_machine_ada_with_tf_220_is_fine(tmp_env: dict[str, str], tmp_path: Path) -> None:
    assert _walk(tmp_env, tmp_path, "8.9", version="2.20.0", cudnn="9.3.0.75")["checks"] == []


def test_the_doctor_reads_a_sites_own_row(tmp_path: Path, tmp_env: dict[str, str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The far end of a GPU-family addition (tests/knowledge/test_gpu_family_addition.py): a row added to a
    site's kernels.yaml is what `doctor --log` names, with no code change."""
    env = {**tmp_env, "TFGPU_PROFILES_DIR": str(site(tmp_path))}
    f = tmp_path / "log.txt"
    f.write_text("LLVM ERROR: PTX version 8.5 does not support target 'sm_137' (or 'sm_137a')\n")
    assert main(["doctor", "--log", str(f), "--json"], environ=env) == 13
    doc = json.loads(capsys.readouterr().out)
    assert "testwell-ptx-jit" in doc["primary"]["knowledge"] and "example.invalid" in doc["primary"]["source"]
