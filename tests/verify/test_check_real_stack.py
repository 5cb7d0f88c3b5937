"""The check against the real things: NVIDIA's own libraries from PyPI and real TensorFlow (on the CPU).

Slow: the first run installs TensorFlow and the CUDA wheels into a temp venv (uv's cache makes
repeats take seconds). Without a driver, the real libraries must answer with their real codes.
"""

from __future__ import annotations

import ctypes.util
import json
from pathlib import Path

import pytest

from tests.support.stublibs import CPU_SEAM, layer, run_check
from tests.support.tfenv import STABLE_PLAN

pytestmark = pytest.mark.slow

no_driver = pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                               reason="a CUDA driver is installed: the no-driver error codes do not apply")


def _py(env: Path) -> str:
    return str(env / "bin" / "python")


@no_driver
def test_real_nvidia_libraries_without_a_driver(tf_env: Path, tmp_path: Path) -> None:
    doc = run_check(["--root", str(tmp_path), "--layers", "2,3,4", "--keep-going",
                     "--plan-json", json.dumps(STABLE_PLAN)], python=_py(tf_env))
    lay2, lay3, lay4 = layer(doc, 2), layer(doc, 3), layer(doc, 4)
    # cudaRuntimeGetVersion answers without a GPU; cudaGetDeviceCount says there is no driver.
    assert lay2["measured"]["runtime_cuda"] == "12.3"
    assert "site-packages/nvidia/cuda_runtime/lib/libcudart.so.12" in lay2["measured"]["libcudart"]
    assert lay2["status"] == "fail" and lay2["error"] == {"code": 35, "name": "cudaErrorInsufficientDriver"}
    # cudnnGetVersion answers from the wheel the plan placed (built for CUDA 12.2: same major as the
    # runtime); a handle needs the GPU, and real cuDNN says so with its real status.
    assert lay3["measured"]["cudnn"] == "8.9.7" and lay3["measured"]["cudnn_cuda"] == "12.2"
    assert lay3["status"] == "fail" and "cudnnCreate failed: CUDNN_STATUS_NOT_INITIALIZED (1)" in lay3["summary"]
    assert "site-packages/nvidia/cudnn/lib/libcudnn.so.8" in lay3["measured"]["libcudnn"]
    # cublasCreate cannot initialise without a driver, and says so with its real status.
    assert lay4["status"] == "fail" and lay4["error"] == {"code": 1, "name": "CUBLAS_STATUS_NOT_INITIALIZED"}


def test_tensorflow_cpu_path_passes(tf_env: Path, tmp_path: Path) -> None:
    """What an --allow-cpu install runs: TF imported, build info checked, matmul and conv2d on the CPU."""
    doc = run_check(["--root", str(tmp_path), "--cpu-ok", "--plan-json", json.dumps(STABLE_PLAN)], python=_py(tf_env))
    assert doc["ok"] is True and doc["mode"] == "cpu" and doc["gpu_verified"] is False
    lay5 = layer(doc, 5)
    assert lay5["status"] == "pass", lay5
    m = lay5["measured"]
    assert m["tensorflow"] == "2.17.1"
    assert m["build"]["is_cuda_build"] is True and m["build"]["cuda_version"] == "12.3"
    assert m["matmul_device"].endswith("device:CPU:0") and m["matmul_max_abs_error"] < 1e-2
    assert m["conv2d_device"].endswith("device:CPU:0")
    assert m["tf32_restored_to"] is True  # TF's default (TF32 on) is put back after the exactness checks
    assert doc["extras"]["mirrored_strategy"]["replicas"] == 1
    # issue 41: the strategy is run, not only made: one step's all-reduce, its sum checked on every replica
    assert m["all_reduce"]["ok"] is True and m["all_reduce"]["replicas"] == 1 and m["all_reduce"]["max_error"] == 0
    assert "all-reduce over 1 replica(s) is exact" in lay5["summary"]
    assert doc["tf_log"]["tail"], "TF's own log lines are captured"


def test_tensorflow_gpu_machinery_through_the_test_device(tf_env: Path, tmp_path: Path) -> None:
    """The GPU path (layer 5, benchmark, burn with telemetry) pinned to /CPU:0 through the test-only seam."""
    doc = run_check(["--root", str(tmp_path), "--layers", "5", "--benchmark", "--bench-sizes", "64,128",
                     "--burn", "1", "--burn-size", "128", "--plan-json", json.dumps(STABLE_PLAN)],
                    python=_py(tf_env), script=CPU_SEAM)
    assert doc["gpu_verified"] is False  # a run through the seam never vouches for a GPU
    assert layer(doc, 5)["status"] == "pass"
    lay6 = layer(doc, 6)
    assert lay6["status"] == "pass", lay6
    bench = lay6["measured"]["benchmark"]
    assert [r["n"] for r in bench["sizes"]] == [64, 128]
    assert bench["tf32_setting_kept"] is True and all("tf32_gflops" in r for r in bench["sizes"])
    assert all(r["cpu_gflops"] > 0 and r["gpu_gflops"] > 0 and r["speedup"] > 0 for r in bench["sizes"])
    burn = lay6["measured"]["burn"]
    assert burn["iterations"] >= 1 and burn["mismatches"] == 0 and burn["throttled"] == []
    # issue 41: graph-loop batches (one sync each), every product compared exactly, the host's share measured
    assert burn["kind"] == "tensorflow-matmul" and "every product, exactly" in burn["compared"]
    assert burn["series"]["gflops"] and 0.0 <= burn["host_share"] < 1.0
    assert bench["headline"]["math"] == "fp32" and bench["mixed_precision"]["measured"] is False
    # No NVML here: the burn says so instead of inventing samples.
    assert burn["telemetry"]["samples"] == 0 and "NVML not available" in burn["telemetry"]["error"]


def test_tensorflow_without_a_gpu_fails_layer_5(tf_env: Path, tmp_path: Path) -> None:
    doc = run_check(["--root", str(tmp_path), "--layers", "5", "--plan-json", json.dumps(STABLE_PLAN)],
                    python=_py(tf_env))
    lay5 = layer(doc, 5)
    assert lay5["status"] == "fail" and lay5["summary"].startswith("TensorFlow sees no GPU")
    # TF's own log, captured: the loader names the library it could not open (TensorRT's is harmless).
    failures = {d["library"]: d["harmless"] for d in lay5["measured"]["log"]["dlopen_failures"]}
    if ctypes.util.find_library("cuda") is None:
        assert lay5["summary"] == "TensorFlow sees no GPU: could not load libcuda.so.1"
        assert failures["libcuda.so.1"] is False
    assert failures, "the loader's failures are captured (libcuda's at least, without a driver)"
    # Exactly TensorRT's are harmless (an all() over the libnvinfer ones passed with none of them).
    assert {lib for lib, harmless in failures.items() if harmless} == {
        lib for lib in failures if lib.startswith(("libnvinfer", "nvinfer"))}


def test_build_info_other_than_the_plan_fails(tf_env: Path, tmp_path: Path) -> None:
    plan = dict(STABLE_PLAN, cuda="11.8")
    doc = run_check(["--root", str(tmp_path), "--cpu-ok", "--plan-json", json.dumps(plan)], python=_py(tf_env))
    lay5 = layer(doc, 5)
    assert lay5["status"] == "fail"
    assert "TensorFlow was built for cuda 12.3, the plan placed 11.8" in lay5["summary"]


def test_tensorflow_on_a_driver_it_cannot_use(tf_env: Path, tmp_path: Path) -> None:
    """Real TF loading the stub libcuda (it lacks most of the driver API): layer 1 passes, and layer 5
    reports TF's own failure instead of the check dying with it."""
    from tests.support.stublibs import build_stub_libs

    libs = build_stub_libs(tmp_path / "stubs")
    doc = run_check(["--root", str(tmp_path), "--layers", "1,5", "--keep-going",
                     "--plan-json", json.dumps(STABLE_PLAN)],
                    env={"LD_LIBRARY_PATH": str(libs.driver)}, python=_py(tf_env))
    assert layer(doc, 1)["status"] == "pass"
    lay5 = layer(doc, 5)
    assert lay5["status"] == "fail" and lay5["summary"].startswith("TensorFlow")


@pytest.fixture(scope="module")
def cudnn9_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real cuDNN 9 wheel TF 2.18+ pins (nvidia-cudnn-cu12 9.3.0.75, ~600 MB; uv caches it)."""
    import subprocess
    import sys

    from tests.support.promised import skip_or_fail
    from tests.support.registry import trusted_env
    from tests.support.tfenv import make_venv

    uv = Path(sys.executable).parent / "uv"
    env = make_venv(tmp_path_factory.mktemp("cudnn9") / "env")
    proc = subprocess.run([str(uv), "pip", "install", "-q", "-p", str(env / "bin/python"),
                           "nvidia-cudnn-cu12==9.3.0.75", "nvidia-cuda-runtime-cu12==12.5.82"],
                          capture_output=True, text=True, env=trusted_env())
    if proc.returncode != 0:
        skip_or_fail(f"could not install cuDNN 9 from the registry: {proc.stderr.strip()[-500:]}")
    return env


@no_driver
def test_real_cudnn_9_sub_libraries_and_status_names(cudnn9_env: Path, tmp_path: Path) -> None:
    from tests.support.stublibs import CUDNN9_SUBLIBS

    doc = run_check(["--root", str(tmp_path), "--layers", "2,3", "--keep-going", "--plan-json",
                     json.dumps({"cuda": "12.5", "cudnn": "9.3.0.75"})], python=_py(cudnn9_env))
    lay3 = layer(doc, 3)
    # Every sub-library of the real wheel loads from libcudnn.so.9's directory (the names the stubs use).
    assert sorted(lay3["measured"]["sublibraries"]) == sorted(CUDNN9_SUBLIBS)
    assert lay3["measured"]["cudnn"] == "9.3.0" and lay3["measured"]["cudnn_cuda"] == "12.6"
    # cuDNN 9 numbers its statuses anew (1001); its own cudnnGetErrorString names them.
    assert "cudnnCreate failed: CUDNN_STATUS_NOT_INITIALIZED (1001)" in lay3["summary"]
