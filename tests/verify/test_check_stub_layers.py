"""Layers 0-4 against real gcc-built libraries exporting libcuda/libcudart/libcudnn/libcublas symbols."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.stublibs import StubLibs, layer, plant_pci, run_check

GPU = ("0000:01:00.0", "0x10de", "0x030000")
AUDIO = ("0000:01:00.1", "0x10de", "0x040300")  # the card's HDMI audio function: not a GPU
PLAN = {"cuda": "12.3", "cudnn": "8.9.7.29"}


def _args(root: Path, stubs: StubLibs, plan: dict = PLAN, layers: str = "0,1,2,3,4", *extra: str) -> list[str]:
    return ["--root", str(root), "--layers", layers, "--plan-json", json.dumps(dict(plan, lib_dirs=[str(stubs.env)])),
            *extra]


def _env(stubs: StubLibs, **stub: str) -> dict[str, str]:
    # The driver's libcuda is found the way the loader finds the real one: LD_LIBRARY_PATH.
    return {"LD_LIBRARY_PATH": str(stubs.driver), **stub}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    plant_pci(tmp_path, [GPU, AUDIO, ("0000:00:02.0", "0x8086", "0x030000")])
    return tmp_path


def test_every_layer_passes_on_a_working_stack(root: Path, stubs: StubLibs) -> None:
    doc = run_check(_args(root, stubs), _env(stubs))
    assert doc["ok"] is True
    assert [lay["status"] for lay in doc["layers"]] == ["pass"] * 5
    assert layer(doc, 0)["measured"]["gpus"] == [
        {"pci": "0000:01:00.0", "device_id": "0x2204", "class": "0x030000", "kernel_driver": "nvidia"}]
    drv = layer(doc, 1)["measured"]
    assert drv["driver_cuda"] == "12.4"
    assert drv["devices"][0]["name"] == "Stub GPU 0" and drv["devices"][0]["compute_capability"] == "8.6"
    assert drv["libcuda"].startswith(str(stubs.driver))  # where the loader really found it
    assert layer(doc, 2)["measured"]["runtime_cuda"] == "12.3"
    lay3 = layer(doc, 3)["measured"]  # issue 41: cuDNN is now used (a convolution per algorithm), not only loaded
    assert {k: lay3[k] for k in ("libcudnn", "cudnn", "cudnn_cuda", "handle")} == {
        "libcudnn": str(stubs.env / "libcudnn.so.8"), "cudnn": "8.9.7", "cudnn_cuda": "12.3",
        "handle": "created and destroyed"}
    assert [a["algo"] for a in lay3["devices"][0]["algorithms"]] == ["IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM",
                                                                       "GEMM", "WINOGRAD"]
    assert layer(doc, 4)["measured"]["max_abs_error"] == 0.0
    assert doc["extras"]["mixed_precision"]["eligible"] is True
    assert "tfgpu-check: layer 4 pass" in doc["_stderr"]


def test_no_gpu_fails_layer_0_and_skips_the_rest(tmp_path: Path, stubs: StubLibs) -> None:
    plant_pci(tmp_path, [AUDIO, ("0000:00:02.0", "0x8086", "0x030000")])
    doc = run_check(["--root", str(tmp_path)], _env(stubs))
    assert doc["ok"] is False
    assert layer(doc, 0)["status"] == "fail" and "no NVIDIA GPU" in layer(doc, 0)["summary"]
    assert "--allow-cpu" in layer(doc, 0)["hint"]
    assert [lay["status"] for lay in doc["layers"][1:]] == ["skip"] * 5
    assert all("layer 0 (hardware) failed" in lay["summary"] for lay in doc["layers"][1:])
    assert doc["first_failure"]["layer"] == 0


def test_nouveau_bound_gpu_passes_layer_0_with_a_warning(tmp_path: Path, stubs: StubLibs) -> None:
    plant_pci(tmp_path, [GPU], driver="nouveau")
    lay0 = layer(run_check(["--root", str(tmp_path), "--layers", "0"]), 0)
    assert lay0["status"] == "pass" and "nouveau" in lay0["summary"] and "blacklist nouveau" in lay0["hint"]


def test_wsl2_gpu_is_found_without_pci(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/dxg").write_text("")
    (tmp_path / "usr/lib/wsl/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/wsl/lib/libcuda.so.1").write_text("")
    lay0 = layer(run_check(["--root", str(tmp_path), "--layers", "0"]), 0)
    assert lay0["status"] == "pass" and "WSL2" in lay0["summary"]


@pytest.mark.parametrize("code,name", [(100, "CUDA_ERROR_NO_DEVICE"), (3, "CUDA_ERROR_NOT_INITIALIZED"),
                                       (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH")])
def test_cuinit_failure_is_reported_by_name(root: Path, stubs: StubLibs, code: int, name: str) -> None:
    doc = run_check(_args(root, stubs), _env(stubs, STUB_CU_INIT_ERROR=str(code)))
    lay1 = layer(doc, 1)
    assert lay1["status"] == "fail" and lay1["error"] == {"code": code, "name": name}
    assert f"cuInit failed: {name} ({code})" == lay1["summary"]
    assert [lay["status"] for lay in doc["layers"][2:]] == ["skip"] * 3


def test_hidden_devices_hint_names_cuda_visible_devices(root: Path, stubs: StubLibs) -> None:
    doc = run_check(_args(root, stubs), _env(stubs, CUDA_VISIBLE_DEVICES=""))  # the stub's cuInit gives 100
    assert layer(doc, 1)["error"] == {"code": 100, "name": "CUDA_ERROR_NO_DEVICE"}
    assert "CUDA_VISIBLE_DEVICES=''" in layer(doc, 1)["hint"]


def test_driver_with_no_devices_fails(root: Path, stubs: StubLibs) -> None:
    lay1 = layer(run_check(_args(root, stubs), _env(stubs, STUB_CU_DEVICES="0")), 1)
    assert lay1["status"] == "fail" and lay1["error"]["name"] == "CUDA_ERROR_NO_DEVICE"


def test_missing_libcuda_fails_layer_1(root: Path, stubs: StubLibs) -> None:
    lay1 = layer(run_check(_args(root, stubs), {}), 1)  # no driver dir on the loader path
    assert lay1["status"] == "fail" and "libcuda.so.1 did not load" in lay1["summary"]
    assert "install the NVIDIA driver" in lay1["hint"]


@pytest.mark.parametrize("code,name", [(35, "cudaErrorInsufficientDriver"), (100, "cudaErrorNoDevice")])
def test_cudart_device_count_error_by_name(root: Path, stubs: StubLibs, code: int, name: str) -> None:
    doc = run_check(_args(root, stubs), _env(stubs, STUB_CUDART_COUNT_ERROR=str(code)))
    lay2 = layer(doc, 2)
    assert lay2["status"] == "fail" and lay2["error"] == {"code": code, "name": name}
    assert lay2["measured"]["runtime_cuda"] == "12.3" and lay2["hint"]


def test_runtime_of_another_cuda_major_fails(root: Path, stubs: StubLibs) -> None:
    lay2 = layer(run_check(_args(root, stubs), _env(stubs, STUB_CUDART_VERSION="11080")), 2)
    assert lay2["status"] == "fail" and "CUDA runtime 11.8 but the plan placed CUDA 12.3" in lay2["summary"]


def test_missing_runtime_for_the_planned_cuda(root: Path, stubs: StubLibs) -> None:
    lay2 = layer(run_check(_args(root, stubs, dict(PLAN, cuda="11.8")), _env(stubs)), 2)
    assert lay2["status"] == "fail" and "libcudart.so.11.0 did not load" in lay2["summary"]


def test_cudnn_version_other_than_placed_fails(root: Path, stubs: StubLibs) -> None:
    lay3 = layer(run_check(_args(root, stubs), _env(stubs, STUB_CUDNN_VERSION="8600")), 3)
    assert lay3["status"] == "fail"
    assert lay3["summary"].startswith("cuDNN 8.6.0 loaded from") and "placed 8.9.7.29" in lay3["summary"]


def test_cudnn_9_version_encoding(root: Path, stubs: StubLibs) -> None:
    doc = run_check(_args(root, stubs, dict(PLAN, cudnn="9.3.0.75")), _env(stubs, STUB_CUDNN_VERSION="90300"))
    assert layer(doc, 3)["status"] == "pass"
    lay3 = layer(doc, 3)["measured"]
    assert (lay3["libcudnn"], lay3["cudnn"], lay3["handle"]) == (str(stubs.env / "libcudnn.so.9"), "9.3.0",
                                                                 "created and destroyed")


def test_cublas_create_failure_by_name(root: Path, stubs: StubLibs) -> None:
    lay4 = layer(run_check(_args(root, stubs), _env(stubs, STUB_CUBLAS_CREATE_ERROR="1")), 4)
    assert lay4["status"] == "fail"
    assert lay4["error"] == {"code": 1, "name": "CUBLAS_STATUS_NOT_INITIALIZED"}


def test_wrong_sgemm_result_is_caught(root: Path, stubs: StubLibs) -> None:
    lay4 = layer(run_check(_args(root, stubs), _env(stubs, STUB_CUBLAS_WRONG="1")), 4)
    assert lay4["status"] == "fail" and "differs from the reference" in lay4["summary"]
    assert lay4["measured"]["max_abs_error"] == 1.0


def test_keep_going_runs_every_layer(root: Path, stubs: StubLibs) -> None:
    doc = run_check(_args(root, stubs, PLAN, "0,1,2,3,4", "--keep-going"),
                    _env(stubs, STUB_CUDART_COUNT_ERROR="35"))
    assert [lay["status"] for lay in doc["layers"]] == ["pass", "pass", "fail", "pass", "pass"]
    assert doc["first_failure"]["name"] == "cuda-runtime"


def test_two_gpus_numbered_differently_from_nvidia_smi(tmp_path: Path, stubs: StubLibs) -> None:
    plant_pci(tmp_path, [("0000:01:00.0", "0x10de", "0x030000"), ("0000:02:00.0", "0x10de", "0x030200")])
    doc = run_check(_args(tmp_path, stubs), _env(stubs, STUB_CU_DEVICES="2", STUB_CU_CC="6.1",
                                                  STUB_CU_PCI="0000:02:00.0,0000:01:00.0"))
    assert doc["ok"] is True
    vis = doc["extras"]["visible_devices"]
    assert [(m["cuda"], m["nvidia_smi"]) for m in vis["mapping"]] == [(0, 1), (1, 0)]
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in vis["note"]
    assert doc["extras"]["mixed_precision"]["eligible"] is False


def test_cpu_mode_skips_gpu_layers_with_reason(tmp_path: Path) -> None:
    # The test venv has no TensorFlow: layer 5's import failure is reported, not raised.
    doc = run_check(["--root", str(tmp_path), "--cpu-ok"])
    assert doc["mode"] == "cpu"
    assert [lay["status"] for lay in doc["layers"]] == ["skip"] * 5 + ["fail"]
    assert "CPU-only env (--allow-cpu)" in layer(doc, 0)["summary"] and "no NVIDIA GPU" in layer(doc, 0)["summary"]
    assert "import tensorflow failed" in layer(doc, 5)["summary"]
    assert doc["gpu_verified"] is False


def test_gpu_given_to_a_container_without_a_pci_view(tmp_path: Path) -> None:
    (tmp_path / "proc/driver/nvidia/gpus/0000:3B:00.0").mkdir(parents=True)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidia0").write_text("")
    (tmp_path / "dev/nvidiactl").write_text("")  # the control node is not a GPU
    lay0 = layer(run_check(["--root", str(tmp_path), "--layers", "0"]), 0)
    assert lay0["status"] == "pass" and "1 NVIDIA GPU(s) from the driver (0000:3b:00.0)" in lay0["summary"]
    assert lay0["measured"]["device_nodes"] == ["nvidia0"]
