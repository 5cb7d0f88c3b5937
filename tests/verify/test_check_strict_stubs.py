"""Issue 18 defects 2, 5, 7, 8 against the strict gcc-built stubs: error names read the way the
headers declare them, every return code checked, cuDNN 9's sub-libraries and handle, CUDA 13's layout."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stublibs import CHECK_SCRIPT, CUDNN9_SUBLIBS, StubLibs, layer, plant_pci, run_check

GPU = ("0000:01:00.0", "0x10de", "0x030000")
PLAN = {"cuda": "12.3", "cudnn": "8.9.7.29"}


def _args(root: Path, plan: dict, lib_dirs: list[str], layers: str = "0,1,2,3,4") -> list[str]:
    return ["--root", str(root), "--layers", layers, "--plan-json", json.dumps(dict(plan, lib_dirs=lib_dirs))]


def _env(stubs: StubLibs, **stub: str) -> dict[str, str]:
    return {"LD_LIBRARY_PATH": str(stubs.driver), **stub}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    plant_pci(tmp_path / "root", [GPU])
    return tmp_path / "root"


# ---- defect 2: cuGetErrorName through `const char **`, return codes checked ----------------------
def test_a_code_only_the_driver_knows_is_named_by_the_driver(root: Path, stubs: StubLibs) -> None:
    doc = run_check(_args(root, PLAN, [str(stubs.env)]), _env(stubs, STUB_CU_INIT_ERROR="805"))
    assert layer(doc, 1)["error"] == {"code": 805, "name": "CUDA_ERROR_MPS_CONNECTION_FAILED"}


def test_a_code_nobody_knows_is_reported_not_a_crash(root: Path, stubs: StubLibs) -> None:
    # cuGetErrorName returns CUDA_ERROR_INVALID_VALUE (1) for it: read as a char*, that crashed the check.
    doc = run_check(_args(root, PLAN, [str(stubs.env)]), _env(stubs, STUB_CU_INIT_ERROR="12345"))
    assert layer(doc, 1)["summary"] == "cuInit failed: unknown error 12345 (12345)"


@pytest.mark.parametrize("var,call", [("STUB_CU_DRIVER_VERSION_ERROR", "cuDriverGetVersion"),
                                      ("STUB_CU_NAME_ERROR", "cuDeviceGetName(0)")])
def test_failed_driver_queries_fail_the_layer(root: Path, stubs: StubLibs, var: str, call: str) -> None:
    lay1 = layer(run_check(_args(root, PLAN, [str(stubs.env)]), _env(stubs, **{var: "304"})), 1)
    assert lay1["status"] == "fail"
    assert lay1["summary"] == f"{call} failed: CUDA_ERROR_OPERATING_SYSTEM (304)"
    assert "dmesg" in lay1["hint"]


def test_the_tables_know_304_800_801() -> None:
    spec = importlib.util.spec_from_file_location("tfgpucheck_codes", CHECK_SCRIPT.parent / "tfgpucheck_codes.py")
    assert spec is not None and spec.loader is not None
    codes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(codes)
    assert [codes.CU_RESULT[c] for c in (304, 800, 801)] == [
        "CUDA_ERROR_OPERATING_SYSTEM", "CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_NOT_SUPPORTED"]
    assert [codes.CUDA_ERROR[c] for c in (304, 800, 801)] == [
        "cudaErrorOperatingSystem", "cudaErrorNotPermitted", "cudaErrorNotSupported"]


def test_the_runtime_names_its_own_codes(root: Path, stubs: StubLibs) -> None:
    lay2 = layer(run_check(_args(root, PLAN, [str(stubs.env)]), _env(stubs, STUB_CUDART_COUNT_ERROR="805")), 2)
    assert lay2["error"] == {"code": 805, "name": "cudaErrorMpsConnectionFailed"}


# ---- defect 5: cuDNN handle, CUDA of cuDNN vs runtime, cuDNN 9 sub-libraries ------------------------
def test_cudnn_9_loads_every_sub_library_and_a_handle(root: Path, stubs: StubLibs) -> None:
    doc = run_check(_args(root, dict(PLAN, cudnn="9.3.0.75"), [str(stubs.env)]), _env(stubs))
    lay3 = layer(doc, 3)
    assert lay3["status"] == "pass" and lay3["measured"]["handle"] == "created and destroyed"
    assert set(CUDNN9_SUBLIBS) - {"libcudnn_heuristic.so.9"} <= set(lay3["measured"]["sublibraries"])


def test_a_missing_cudnn_9_sub_library_fails_layer_3(root: Path, stubs: StubLibs, tmp_path: Path) -> None:
    libdir = tmp_path / "cudnn"
    shutil.copytree(stubs.env, libdir)
    (libdir / "libcudnn_engines_precompiled.so.9").unlink()
    lay3 = layer(run_check(_args(root, dict(PLAN, cudnn="9.3.0.75"), [str(libdir)]), _env(stubs)), 3)
    assert lay3["status"] == "fail"
    assert "libcudnn_engines_precompiled.so.9: missing" in lay3["summary"] and "first convolution" in lay3["hint"]


def test_cudnn_built_for_another_cuda_major_fails(root: Path, stubs: StubLibs) -> None:
    lay3 = layer(run_check(_args(root, PLAN, [str(stubs.cudnn_cu11), str(stubs.env)]), _env(stubs)), 3)
    assert lay3["status"] == "fail" and "built for CUDA 11.8, the CUDA runtime is 12.3" in lay3["summary"]
    assert "nvidia-cudnn-cu12" in lay3["hint"]


def test_a_cudnn_handle_that_cannot_be_created_fails(root: Path, stubs: StubLibs) -> None:
    lay3 = layer(run_check(_args(root, PLAN, [str(stubs.env)]), _env(stubs, STUB_CUDNN_CREATE_ERROR="1")), 3)
    assert lay3["status"] == "fail" and "cudnnCreate failed: CUDNN_STATUS_NOT_INITIALIZED (1)" in lay3["summary"]


# ---- defect 7: CUDA 13's sonames and nvidia/cu13/lib ------------------------------------------------
def test_cuda_13_wheels_in_nvidia_cu13_lib(root: Path, stubs: StubLibs, tmp_path: Path) -> None:
    venv = tmp_path / "venv13"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "nvidia/cu13/lib").mkdir(parents=True)
    (site / "nvidia/cudnn/lib").mkdir(parents=True)
    for so in ("libcudart.so.13", "libcublas.so.13"):
        shutil.copy(stubs.cu13 / so, site / "nvidia/cu13/lib" / so)
    for so in ("libcudnn.so.9", *CUDNN9_SUBLIBS):
        shutil.copy(stubs.cudnn_cu13 / so, site / "nvidia/cudnn/lib" / so)
    doc = run_check(_args(root, {"cuda": "13.0", "cudnn": "9.13"}, []),
                    _env(stubs, STUB_CU_DRIVER_VERSION="13000"), python=str(venv / "bin/python"))
    assert [lay["status"] for lay in doc["layers"]] == ["pass"] * 5, doc["layers"]
    assert layer(doc, 2)["measured"]["libcudart"] == str(site / "nvidia/cu13/lib/libcudart.so.13")
    assert layer(doc, 4)["measured"]["libcublas"] == str(site / "nvidia/cu13/lib/libcublas.so.13")


def test_without_a_plan_the_newest_cuda_the_driver_runs_is_used(root: Path, stubs: StubLibs) -> None:
    dirs = [str(stubs.cu13), str(stubs.cudnn_cu13), str(stubs.env)]
    doc = run_check(_args(root, {}, dirs), _env(stubs, STUB_CU_DRIVER_VERSION="13000"))
    assert layer(doc, 2)["measured"]["libcudart"].endswith("libcudart.so.13")
    assert layer(doc, 4)["measured"]["libcublas"].endswith("libcublas.so.13")
    dirs = [str(stubs.cu13), str(stubs.env)]
    older = run_check(_args(root, {}, dirs), _env(stubs, STUB_CU_DRIVER_VERSION="12040"))  # a CUDA 12 driver
    assert layer(older, 2)["measured"]["libcudart"].endswith("libcudart.so.12") and older["ok"]


# ---- defect 8: the stubs refuse what real libraries refuse ------------------------------------------
PROBE = r"""
import ctypes, json, sys
d, e = sys.argv[1], sys.argv[2]
cu = ctypes.CDLL(d + "/libcuda.so.1")
rt = ctypes.CDLL(e + "/libcudart.so.12", mode=ctypes.RTLD_GLOBAL)
bl = ctypes.CDLL(e + "/libcublas.so.12")
out = {}
n = ctypes.c_int()
out["count_before_init"] = cu.cuDeviceGetCount(ctypes.byref(n))
out["init"] = cu.cuInit(0)
h = ctypes.c_void_p()
out["create"] = bl.cublasCreate_v2(ctypes.byref(h))
host = (ctypes.c_float * 16)()
dev = [ctypes.c_void_p() for _ in range(3)]
for p in dev:
    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64))
one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
def sgemm(handle, a, lda):
    return bl.cublasSgemm_v2(handle, 0, 0, 4, 4, 4, ctypes.byref(one), a, lda, dev[1], 4, ctypes.byref(zero), dev[2], 4)
out["sgemm_ok"] = sgemm(h, dev[0], 4)
out["sgemm_host_pointer"] = sgemm(h, host, 4)
out["sgemm_bad_lda"] = sgemm(h, dev[0], 3)
out["sgemm_null_handle"] = sgemm(ctypes.c_void_p(), dev[0], 4)
out["memcpy_wrong_direction"] = rt.cudaMemcpy(host, dev[0], ctypes.c_size_t(64), 1)
out["free_host_pointer"] = rt.cudaFree(host)
name = ctypes.c_char_p()
fn = cu.cuGetErrorName
fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
out["name_100"] = [fn(100, ctypes.byref(name)), name.value.decode()]
out["name_unknown"] = [fn(4242, ctypes.byref(name)), name.value]
print(json.dumps(out))
"""


def _probe(stubs: StubLibs, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, str(stubs.driver), str(stubs.env)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_strict_stubs_refuse_what_the_real_libraries_refuse(stubs: StubLibs) -> None:
    out = _probe(stubs)
    assert out["count_before_init"] == 3 and out["init"] == 0 and out["create"] == 0  # NOT_INITIALIZED first
    assert out["sgemm_ok"] == 0
    assert out["sgemm_host_pointer"] == 13  # CUBLAS_STATUS_EXECUTION_FAILED
    assert out["sgemm_bad_lda"] == 7  # CUBLAS_STATUS_INVALID_VALUE
    assert out["sgemm_null_handle"] == 1  # CUBLAS_STATUS_NOT_INITIALIZED
    assert out["memcpy_wrong_direction"] == 1 and out["free_host_pointer"] == 1
    assert out["name_100"] == [0, "CUDA_ERROR_NO_DEVICE"] and out["name_unknown"] == [1, None]


def test_empty_visible_devices_means_no_device(stubs: StubLibs) -> None:
    assert _probe(stubs, CUDA_VISIBLE_DEVICES="")["init"] == 100
