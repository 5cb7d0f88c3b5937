"""Where an addition goes, for a verification layer (issue 36): one row of the layer table
(verify/gpucheck/tfgpucheck_layers.py), which carries the env wheel behind a library layer. doctor reads
the same row: a library layer is examined through its wheel, and a GPU layer doctor has no check for is
"not checked", never passed on the strength of the driver answering."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doctor_layouts import fake_tf_env, make_ctx, plant_driver_ok, recorded_smi, replay
from tfgpu_install.doctor.chain import walk
from tfgpu_install.doctor.rules import load_rules
from tfgpu_install.verify.gpucheck import tfgpucheck_layers as table

RULES = load_rules()
SMI_OK = recorded_smi("case_027")  # a driver that answers: the GPU layers are judged


def _with_layer(monkeypatch: pytest.MonkeyPatch, layer: table.Layer) -> None:
    """The table with one more default GPU layer after cublas, as a contributor would add it."""
    at = table.NAMES.index("cublas") + 1
    layers = table.LAYERS[:at] + (layer,) + table.LAYERS[at:]
    monkeypatch.setattr(table, "LAYERS", layers)
    monkeypatch.setattr(table, "NAMES", tuple(lay.name for lay in layers))


def _verdicts(tmp_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    env = fake_tf_env(tmp_path / "env")
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin" / "python"))), RULES, str(env))
    return {v.name: v.status for v in rep.layers}


def test_a_new_gpu_layer_without_a_doctor_check_is_not_passed(tmp_env: dict[str, str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _with_layer(monkeypatch, table.Layer("cufft", "gpu", True, True, "cuFFT died"))
    got = _verdicts(tmp_env, tmp_path)
    assert got["cufft"] == "not checked"  # was "ok": "driver ... answers" stood in for a check never made
    assert got["driver"] == "ok" and got["tensorflow"] == "ok"


def test_a_new_library_layer_is_examined_through_the_wheel_its_row_names(tmp_env: dict[str, str], tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _with_layer(monkeypatch, table.Layer("cufft", "gpu", True, True, "cuFFT died", wheel="nvidia-cufft"))
    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    env = fake_tf_env(tmp_path / "env")
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin" / "python"))), RULES, str(env))
    cufft = next(v for v in rep.layers if v.name == "cufft")
    assert cufft.status == "not checked" and "nvidia-cufft" in cufft.summary  # the env has no such wheel: said so


def test_control_the_packaged_rows_name_their_wheels() -> None:
    wheels = {lay.name: lay.wheel for lay in table.LAYERS if lay.wheel}
    assert wheels == {"cuda-runtime": "nvidia-cuda-runtime", "cudnn": "nvidia-cudnn", "cublas": "nvidia-cublas"}
