"""Issue 41 defect 1 and issue 40's GPU-check part: the cudnn layer runs a convolution with every algorithm
cuDNN offers and compares it with the host; it names the algorithm and status that failed, the GPU, and the
known causes (cuDNN >= 9.11 on a GPU below compute capability 7.5, a missing NVRTC)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.stublibs import StubLibs, layer, plant_pci, run_check


def _check(tmp_path: Path, stubs: StubLibs, cudnn: str = "8.9.7.29", gpus: int = 1, dirs: tuple[Path, ...] = (),
           **env: str) -> dict[str, Any]:
    plant_pci(tmp_path / "root", [(f"0000:0{i + 1}:00.0", "0x10de", "0x030000") for i in range(gpus)])
    plan = {"cuda": "12.3", "cudnn": cudnn, "lib_dirs": [str(d) for d in dirs] + [str(stubs.env)]}
    args = ["--root", str(tmp_path / "root"), "--layers", "driver,cuda-runtime,cudnn", "--plan-json", json.dumps(plan)]
    return layer(run_check(args, {"LD_LIBRARY_PATH": str(stubs.driver), "STUB_CU_DEVICES": str(gpus), **env}),
                 "cudnn")


def test_every_offered_algorithm_runs_and_matches_the_host(tmp_path: Path, stubs: StubLibs) -> None:
    lay = _check(tmp_path, stubs, STUB_CUDNN_ALGOS="0,1,2,3,4,5,6,7")
    (dev,) = lay["measured"]["devices"]
    assert lay["status"] == "pass" and [a["algo"] for a in dev["algorithms"]] == [
        "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
        "WINOGRAD_NONFUSED"]
    assert all(a["ok"] and a["max_abs_error"] == 0.0 for a in dev["algorithms"])
    assert dev["tensor_op"]["ok"] is True and "with tensor-op math too" in lay["summary"]


@pytest.mark.parametrize("fault,named", [
    ({"STUB_CUDNN_CONV_ERROR": "6:5000"}, "WINOGRAD: cudnnConvolutionForward failed: "
                                          "CUDNN_STATUS_EXECUTION_FAILED (8)"),
    ({"STUB_CUDNN_CONV_ERROR": "1:4"}, "IMPLICIT_PRECOMP_GEMM: cudnnConvolutionForward failed: "
                                       "CUDNN_STATUS_INTERNAL_ERROR (4)"),
    ({"STUB_CUDNN_CONV_WRONG": "2"}, "GEMM: wrong results (max error 3"),
    ({"STUB_CUDNN_NO_ENGINE": "1"}, "cuDNN offers no forward algorithm for this GPU (IMPLICIT_GEMM: "
                                    "CUDNN_STATUS_NOT_SUPPORTED (9)"),
])
def test_a_failing_convolution_fails_the_layer_naming_algorithm_and_status(tmp_path: Path, stubs: StubLibs,
                                                                           fault: dict[str, str], named: str) -> None:
    """Before: cuDNN was loaded and a handle made, never used: each of these passed."""
    if "STUB_CUDNN_CONV_ERROR" in fault:  # cuDNN 8 numbers its statuses 1, 2, 3 ... (8 = EXECUTION_FAILED)
        fault = {"STUB_CUDNN_CONV_ERROR": fault["STUB_CUDNN_CONV_ERROR"].replace("5000", "8")}
    lay = _check(tmp_path, stubs, **fault)
    assert lay["status"] == "fail" and named in lay["summary"], lay["summary"]
    assert "convolution forward failed" in lay["summary"] and lay["hint"]


def test_a_second_gpu_whose_convolution_fails_is_named_while_gpu_0_passes(tmp_path: Path, stubs: StubLibs) -> None:
    lay = _check(tmp_path, stubs, gpus=2, STUB_CUDNN_CONV_ERROR="0:8", STUB_CUDNN_FAULT_DEVICE="1")
    gpu0, gpu1 = lay["measured"]["devices"]
    assert all(a["ok"] for a in gpu0["algorithms"]) and gpu0["failure"] is None
    assert lay["status"] == "fail" and "GPU 1: convolution forward failed: IMPLICIT_GEMM" in lay["summary"]


@pytest.mark.parametrize("version,cc,fails", [("91100", "6.1", True), ("92400", "7.0", True),
                                              ("91100", "7.5", False), ("91000", "6.1", False)])
def test_cudnn_9_11_or_later_on_a_gpu_below_7_5_is_named(tmp_path: Path, stubs: StubLibs, version: str, cc: str,
                                                         fails: bool) -> None:
    lay = _check(tmp_path, stubs, cudnn="9", STUB_CUDNN_VERSION=version, STUB_CU_CC=cc)
    if not fails:
        assert lay["status"] == "pass", lay["summary"]
        return
    assert lay["status"] == "fail" and "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH (3007)" in lay["summary"]
    assert f"this GPU is {cc} with cuDNN" in lay["hint"] and "cuDNN >= 9.11 has no kernels for compute " \
        "capability < 7.5" in lay["hint"] and "support matrix" in lay["hint"] and "9.10.2.21 is the last" in lay["hint"]


def test_a_missing_nvrtc_is_named_when_cudnn_9_fails(tmp_path: Path, stubs: StubLibs) -> None:
    lay = _check(tmp_path, stubs, cudnn="9", STUB_CUDNN_CONV_ERROR="0:3008")
    assert lay["measured"]["nvrtc"] is None and "libnvrtc" in lay["hint"]
    nvrtc = tmp_path / "nvrtc"
    nvrtc.mkdir()
    (nvrtc / "libnvrtc.so.12").write_bytes((stubs.cu13 / "libnvrtc.so.13").read_bytes())
    found = _check(tmp_path / "b", stubs, cudnn="9", dirs=(nvrtc,), STUB_CUDNN_CONV_ERROR="0:3008")
    assert found["measured"]["nvrtc"] == str(nvrtc / "libnvrtc.so.12") and "libnvrtc" not in found["hint"]
