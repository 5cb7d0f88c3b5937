"""Issue 25: the check on an H200-shaped machine (driver 580 / CUDA 13.0, Python 3.12 in a venv with
the CUDA wheels), against stubs as unkind as the real libraries: defects 3, 6, 11, 12, 15."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.support.stublibs import CUDNN9_SUBLIBS, StubLibs, layer, plant_pci, run_check
from tfgpu_install.runner import Completed
from tfgpu_install.verify.host import parse_check_output

H200 = ("0000:19:00.0", "0x10de", "0x030200")  # a 3D controller, as data-centre GPUs are
DRIVER_580 = {"STUB_CU_DRIVER_VERSION": "13000", "STUB_CU_CC": "9.0", "STUB_CU_PCI": "0000:19:00.0"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    plant_pci(tmp_path / "root", [H200])
    return tmp_path / "root"


def _venv(tmp_path: Path, name: str) -> tuple[Path, Path]:
    venv = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv, next(venv.glob("lib/python3*/site-packages"))


def _place(src: Path, names: tuple[str, ...], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for so in names:
        shutil.copy(src / so, dest / so)


def _env(stubs: StubLibs, *extra_dirs: Path, **stub: str) -> dict[str, str]:
    return {"LD_LIBRARY_PATH": ":".join([str(stubs.driver), *map(str, extra_dirs)]), **DRIVER_580, **stub}


# ---- defect 3: a machine-wide CUDA 13 beside an env with CUDA 12 wheels ---------------------------------
def test_no_plan_takes_the_envs_cuda_12_over_the_systems_cuda_13(root: Path, stubs: StubLibs, tmp_path: Path) -> None:
    venv, site = _venv(tmp_path, "cu12env")
    _place(stubs.env, ("libcudart.so.12",), site / "nvidia/cuda_runtime/lib")
    _place(stubs.env, ("libcublas.so.12",), site / "nvidia/cublas/lib")
    _place(stubs.env, ("libcudnn.so.9", *CUDNN9_SUBLIBS), site / "nvidia/cudnn/lib")  # cuDNN 9 built for 12.6
    # /usr/local/cuda-13.0/lib64 on the loader's path (ld.so.conf or LD_LIBRARY_PATH): the toolkit's runtime.
    doc = run_check(["--root", str(root), "--layers", "hardware,driver,cuda-runtime,cudnn,cublas", "--plan-json", "{}"],
                    _env(stubs, stubs.cu13), python=str(venv / "bin/python"))
    assert layer(doc, "cuda-runtime")["measured"]["libcudart"] == str(site / "nvidia/cuda_runtime/lib/libcudart.so.12")
    assert layer(doc, "cudnn")["status"] == "pass", layer(doc, "cudnn")
    assert layer(doc, "cudnn")["measured"]["cudnn_cuda"] == "12.6"
    assert doc["ok"] is True, doc["layers"]


# ---- defect 6: cuDNN 9 aborts in its first call without libcudnn_graph.so.9 -------------------------------
def test_the_stub_aborts_as_real_cudnn_9_does(stubs: StubLibs, tmp_path: Path) -> None:
    libdir = tmp_path / "cudnn"
    _place(stubs.env, ("libcudnn.so.9", *CUDNN9_SUBLIBS), libdir)
    (libdir / "libcudnn_graph.so.9").unlink()
    code = f"import ctypes; ctypes.CDLL('{libdir}/libcudnn.so.9').cudnnGetVersion()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == -6 and "Cannot load symbol cudnnGetVersion" in done.stderr  # SIGABRT, as the real one


def test_a_missing_graph_library_is_named_before_the_first_cudnn_call(root: Path, stubs: StubLibs,
                                                                      tmp_path: Path) -> None:
    libdir = tmp_path / "cudnn"
    _place(stubs.env, ("libcudnn.so.9", *CUDNN9_SUBLIBS), libdir)
    (libdir / "libcudnn_graph.so.9").unlink()
    plan = {"cuda": "12.3", "cudnn": "9.3.0.75", "lib_dirs": [str(libdir), str(stubs.env)]}
    doc = run_check(["--root", str(root), "--layers", "cudnn", "--plan-json", json.dumps(plan)], _env(stubs))
    lay = layer(doc, "cudnn")
    assert lay["status"] == "fail" and "libcudnn_graph.so.9: missing" in lay["summary"]
    assert "aborts the process" in lay["hint"]


def test_a_sigabrt_in_the_cudnn_layer_is_mapped_to_its_cause() -> None:
    died = Completed(("python", "check.py"), -6, "", "tfgpu-check: layer 3 begin\n")
    report = parse_check_output(died)
    lay = report.layer("cudnn")
    assert lay is not None and lay.status == "fail" and "crashed (SIGABRT)" in lay.summary
    assert lay.hint is not None and "libcudnn_graph.so.9" in lay.hint
    driver = report.layer("driver")
    assert driver is not None and driver.status == "skip"


# ---- defect 11: exclusive-process compute mode is named in the CUDA runtime layer -------------------------
def test_exclusive_process_mode_held_elsewhere_fails_layer_2_not_cudnn(root: Path, stubs: StubLibs) -> None:
    plan = {"cuda": "12.3", "cudnn": "8.9.7.29", "lib_dirs": [str(stubs.env)]}
    doc = run_check(["--root", str(root), "--plan-json", json.dumps(plan)],
                    _env(stubs, STUB_CU_COMPUTE_MODE="3", STUB_CU_EXCLUSIVE_BUSY="1", STUB_CU_DRIVER_VERSION="12040"))
    lay = layer(doc, "cuda-runtime")
    assert lay["status"] == "fail", doc["layers"]
    assert lay["error"] == {"code": 46, "name": "cudaErrorDevicesUnavailable"}
    assert "compute mode: exclusive-process" in lay["summary"] and "nvidia-smi -c DEFAULT" in lay["hint"]
    assert layer(doc, "driver")["measured"]["devices"][0]["compute_mode"] == "exclusive-process"
    assert layer(doc, "cudnn")["status"] == "skip"


def test_a_context_is_made_in_layer_2_on_a_healthy_gpu(root: Path, stubs: StubLibs) -> None:
    plan = {"cuda": "12.3", "lib_dirs": [str(stubs.env)]}
    doc = run_check(["--root", str(root), "--layers", "driver,cuda-runtime", "--plan-json", json.dumps(plan)],
                    _env(stubs, STUB_CU_DRIVER_VERSION="12040"))
    assert layer(doc, "cuda-runtime")["measured"]["context"] == "created on device 0"
    assert layer(doc, "driver")["measured"]["devices"][0]["compute_mode"] == "default"


# ---- defect 12: Blackwell on a cuDNN older than it ---------------------------------------------------------
@pytest.mark.parametrize("cc,noted", [("12.0", True), ("10.0", True), ("9.0", False)])
def test_cudnn_forward_compatibility_mode_is_reported(root: Path, stubs: StubLibs, cc: str, noted: bool) -> None:
    plan = {"cuda": "12.3", "cudnn": "9.3.0.75", "lib_dirs": [str(stubs.env)]}
    doc = run_check(["--root", str(root), "--layers", "driver,cuda-runtime,cudnn", "--plan-json", json.dumps(plan)],
                    _env(stubs, STUB_CU_CC=cc, STUB_CU_DRIVER_VERSION="12080"))
    lay = layer(doc, "cudnn")
    assert lay["status"] == "pass" and lay["measured"]["cudnn_max_device_sm"] == 900
    if noted:
        assert lay["measured"]["forward_compatibility"] == [cc]
        assert "forward-compatibility mode" in lay["hint"]
    else:
        assert "forward_compatibility" not in lay["measured"] and lay["hint"] is None


def test_a_cudnn_that_knows_blackwell_runs_it_natively(root: Path, stubs: StubLibs) -> None:
    plan = {"cuda": "13.0", "cudnn": "9.13", "lib_dirs": [str(stubs.cudnn_cu13), str(stubs.cu13)]}
    doc = run_check(["--root", str(root), "--layers", "driver,cuda-runtime,cudnn", "--plan-json", json.dumps(plan)],
                    _env(stubs, STUB_CU_CC="12.0"))
    lay = layer(doc, "cudnn")
    assert lay["status"] == "pass" and lay["measured"]["cudnn_max_device_sm"] == 1200 and lay["hint"] is None


# ---- defect 15 / stubs: cuDNN 9's status numbers and its unknown-status string ------------------------------
@pytest.mark.parametrize("code,name", [("5003", "CUDNN_STATUS_EXECUTION_FAILED_CUDART (5003)"),
                                       ("4242", "unknown error 4242 (4242)")])
def test_cudnn_9_statuses_by_name(root: Path, stubs: StubLibs, code: str, name: str) -> None:
    plan = {"cuda": "12.3", "cudnn": "9.3.0.75", "lib_dirs": [str(stubs.env)]}
    doc = run_check(["--root", str(root), "--layers", "driver,cuda-runtime,cudnn", "--plan-json", json.dumps(plan)],
                    _env(stubs, STUB_CUDNN_CREATE_ERROR=code, STUB_CU_DRIVER_VERSION="12080"))
    assert f"cudnnCreate failed: {name}" in layer(doc, "cudnn")["summary"]


def test_no_plan_and_a_cudnn_9_without_its_graph_library_does_not_abort_layer_2(root: Path, stubs: StubLibs,
                                                                                  tmp_path: Path) -> None:
    """Layer 2 asks the env's cuDNN which CUDA it was built for: never through a shim that would abort."""
    venv, site = _venv(tmp_path, "broken")
    _place(stubs.env, ("libcudart.so.12",), site / "nvidia/cuda_runtime/lib")
    _place(stubs.env, ("libcudnn.so.9",), site / "nvidia/cudnn/lib")
    (site / "nvidia/cudnn/lib/libcudnn_graph.so.9").mkdir()  # present, but not a library
    doc = run_check(["--root", str(root), "--layers", "driver,cuda-runtime,cudnn", "--keep-going", "--plan-json", "{}"],
                    _env(stubs, STUB_CU_DRIVER_VERSION="12040"), python=str(venv / "bin/python"))
    assert layer(doc, "cuda-runtime")["status"] == "pass"
    assert "libcudnn_graph.so.9" in layer(doc, "cudnn")["summary"] and layer(doc, "cudnn")["status"] == "fail"


def test_host_only_finds_the_cuda_13_wheels_of_a_venv_on_path(root: Path, stubs: StubLibs, tmp_path: Path) -> None:
    """The lent machine's shape end to end: a uv-style venv (bin/python3 a link to the base) holding
    nvidia/cu13/lib and nvidia/cudnn/lib, a driver for CUDA 13.0, an H200 (cc 9.0) on the bus."""
    venv, site = _venv(tmp_path, ".venv")
    assert (venv / "bin/python3").is_symlink()
    _place(stubs.cu13, ("libcudart.so.13", "libcublas.so.13"), site / "nvidia/cu13/lib")
    _place(stubs.cudnn_cu13, ("libcudnn.so.9", *CUDNN9_SUBLIBS), site / "nvidia/cudnn/lib")
    env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp_path), "TFGPU_ROOT": str(root),
           "TFGPU_STATE_DIR": str(tmp_path / "state"), "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
           "TFGPU_DATA_DIR": str(tmp_path / "data"), **_env(stubs)}
    done = subprocess.run([sys.executable, "-m", "tfgpu_install", "verify", "--host-only", "--json", "--search",
                           str(venv)], env=env, capture_output=True, text=True, timeout=300)
    doc = json.loads(done.stdout)
    assert done.returncode == 0, doc
    by_name = {lay["name"]: lay for lay in doc["layers"]}
    assert [lay["status"] for lay in doc["layers"]] == ["pass"] * 5
    assert by_name["cuda-runtime"]["measured"]["libcudart"] == str(site / "nvidia/cu13/lib/libcudart.so.13")
    assert by_name["cudnn"]["measured"]["cudnn"] == "9.13.0" and by_name["cudnn"]["hint"] is None
    assert by_name["driver"]["measured"]["devices"][0]["compute_capability"] == "9.0"


# ---- issue 41: the H200-shaped simulation -------------------------------------------------------------
# An H200 node as the lent machine is: driver 580 (CUDA 13.0), cc 9.0, the CUDA 13 wheels (nvidia/cu13/lib
# with NVRTC) and cuDNN 9.13 for CUDA 13; one or two GPUs.
H200_PLAN = {"cuda": "13.0", "cudnn": "9.13"}
SECOND = ("0000:2a:00.0", "0x10de", "0x030200")


def _h200(root: Path, stubs: StubLibs, layers: str = "hardware,driver,cuda-runtime,cudnn,cublas",
          extra: tuple[str, ...] = (), driver_dir: Optional[Path] = None, **stub: str) -> dict:
    plan = dict(H200_PLAN, lib_dirs=[str(stubs.cudnn_cu13), str(stubs.cu13)])
    env = {"LD_LIBRARY_PATH": str(driver_dir or stubs.driver), **DRIVER_580, "STUB_CUBLAS_SGEMM_US": "2000", **stub}
    return run_check(["--root", str(root), "--layers", layers, "--plan-json", json.dumps(plan), *extra], env)


def _two(tmp_path: Path) -> Path:
    plant_pci(tmp_path / "root2", [H200, SECOND])
    return tmp_path / "root2"


TWO = {"STUB_CU_DEVICES": "2", "STUB_CU_PCI": "0000:19:00.0,0000:2a:00.0"}
BURN = ("--sgemm-burn", "1", "--sgemm-burn-size", "64", "--sample-interval", "0.1")


def test_sim_every_layer_passes_on_a_healthy_h200(root: Path, stubs: StubLibs) -> None:
    doc = _h200(root, stubs, extra=BURN)
    assert doc["ok"] is True, [(lay["name"], lay["summary"]) for lay in doc["layers"]]
    dnn = layer(doc, "cudnn")["measured"]
    assert dnn["nvrtc"] == str(stubs.cu13 / "libnvrtc.so.13") and dnn["devices"][0]["failure"] is None
    assert "health counters ok on 1 of 1 GPU(s)" in layer(doc, "driver")["summary"]


def test_sim_a_convolution_that_fails_once_the_handle_is_made(root: Path, stubs: StubLibs) -> None:
    """cudnnCreate succeeds; the first convolution fails (EXECUTION_FAILED): before, the layer passed."""
    lay = layer(_h200(root, stubs, STUB_CUDNN_CONV_ERROR="1:5000"), "cudnn")
    assert lay["status"] == "fail"
    assert "IMPLICIT_PRECOMP_GEMM: cudnnConvolutionForward failed: CUDNN_STATUS_EXECUTION_FAILED (5000)" in \
        lay["summary"]
    assert "TensorFlow's first convolution would fail the same way" in lay["hint"]


def test_sim_one_wrong_product_mid_batch(root: Path, stubs: StubLibs) -> None:
    six = layer(_h200(root, stubs, extra=BURN, STUB_CUBLAS_WRONG_AT="23"), "benchmark")
    assert six["status"] == "fail" and six["measured"]["burn"]["mismatches"] == 1


def test_sim_86_degrees_under_load(root: Path, stubs: StubLibs) -> None:
    six = layer(_h200(root, stubs, extra=BURN, STUB_NVML_TEMP="86", STUB_NVML_MEM_TEMP="79"), "benchmark")
    heat = six["measured"]["burn"]["heat"]
    assert (heat["verdict"], heat["max_c"], heat["mem_max_c"]) == ("hot", 86, 79)
    assert six["status"] == "pass" and "cooling" in six["hint"] and "above 80 C" in six["summary"]


def test_sim_a_pending_row_remap_with_uncorrectable_ecc_errors(root: Path, stubs: StubLibs) -> None:
    """Before: never read; a card that needs a reset passed every layer."""
    doc = _h200(root, stubs, STUB_NVML_REMAP_PENDING="1", STUB_NVML_REMAP_UNC="1", STUB_NVML_ECC_UNCORRECTED="2")
    drv = layer(doc, "driver")
    assert drv["status"] == "fail" and doc["first_failure"]["name"] == "driver"
    assert "a row remap is pending" in drv["summary"] and "2 uncorrectable ECC error(s)" in drv["summary"]
    assert "nvidia-smi -r -i 0" in drv["hint"] and "needs service" in drv["hint"]
    health = drv["measured"]["nvml"]["gpus"][0]["health"]
    assert health["remapped_rows"] == {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    assert health["retired_pages"] == {"unsupported": "nvmlDeviceGetRetiredPages: Not Supported (3)"}


def test_sim_a_container_given_only_libcuda(root: Path, stubs: StubLibs, tmp_path: Path) -> None:
    """No libnvidia-ml.so.1: the check still runs, and heat and health are unknown, never 0 or 'ok'."""
    only = tmp_path / "driver-only"
    _place(stubs.driver, ("libcuda.so.1",), only)
    doc = _h200(root, stubs, extra=BURN, driver_dir=only)
    drv, six = layer(doc, "driver"), layer(doc, "benchmark")
    assert drv["status"] == "pass" and "health counters unknown (NVML: libnvidia-ml.so.1 did not load" in \
        drv["summary"]
    burn = six["measured"]["burn"]
    assert six["status"] == "pass" and burn["products"] > 0
    assert burn["heat"]["verdict"] == "unknown" and burn["health"]["state"] == "unknown"
    assert "temperature unknown" in six["summary"] and "under 80" not in six["summary"]
    assert "nvml_error" in doc["extras"]["visible_devices"]


def test_sim_exclusive_process_mode_held_elsewhere(root: Path, stubs: StubLibs) -> None:
    doc = _h200(root, stubs, STUB_CU_COMPUTE_MODE="3", STUB_CU_EXCLUSIVE_BUSY="1", STUB_NVML_PROCS="0:4242:10240")
    lay = layer(doc, "cuda-runtime")
    assert lay["status"] == "fail" and lay["error"]["name"] == "cudaErrorDevicesUnavailable"
    assert "compute mode: exclusive-process; held by pid 4242 (10240 MiB)" in lay["summary"]
    assert layer(doc, "driver")["measured"]["nvml"]["gpus"][0]["processes"] == [
        {"pid": 4242, "used_mib": 10240, "this_check": False}]


@pytest.mark.parametrize("fault,where", [
    ({"STUB_CUDART_CTX_ERROR": "1:999"}, ("cuda-runtime", "GPU 1: cudaFree(0) (context creation) failed: "
                                                          "cudaErrorUnknown (999)")),
    ({"STUB_CUDNN_CONV_ERROR": "0:5000", "STUB_CUDNN_FAULT_DEVICE": "1"}, ("cudnn", "GPU 1: convolution forward")),
    ({"STUB_CUBLAS_WRONG_AT": "1", "STUB_CUBLAS_WRONG_DEVICE": "1"}, ("cublas", "SGEMM 64x64x64 on GPU 1 differs")),
    ({"STUB_CUBLAS_WRONG_AT": "20", "STUB_CUBLAS_WRONG_DEVICE": "1"}, ("benchmark", "GPU 1 (Stub GPU 1): ")),
])
def test_sim_a_second_gpu_that_fails_while_gpu_0_passes(tmp_path: Path, stubs: StubLibs, fault: dict[str, str],
                                                        where: tuple[str, str]) -> None:
    """Before: only CUDA device 0 ran layers 2-4 and the burn."""
    doc = _h200(_two(tmp_path), stubs, extra=BURN + ("--keep-going",), **TWO, **fault)
    name, text = where
    lay = layer(doc, name)
    assert lay["status"] == "fail" and text in lay["summary"], lay["summary"]
    per_device = lay["measured"].get("devices") or lay["measured"].get("burns") or []
    if name != "cuda-runtime":
        assert len(per_device) == 2
        first = per_device[0]
        assert first.get("status", "pass") == "pass" and not first.get("failure") and not first.get("mismatches")


@pytest.mark.parametrize("code,name,words", [
    ("804", "cudaErrorCompatNotSupportedOnDevice", "forward-compatibility libcuda"),
    ("222", "cudaErrorUnsupportedPtxVersion", "newer CUDA toolkit than this driver"),
    ("209", "cudaErrorNoKernelImageForDevice", "no kernels for this GPU's compute capability"),
])
def test_sim_hints_for_804_222_209(root: Path, stubs: StubLibs, code: str, name: str, words: str) -> None:
    lay = layer(_h200(root, stubs, STUB_CUDART_CTX_ERROR=f"0:{code}"), "cuda-runtime")
    assert lay["error"] == {"code": int(code), "name": name} and words in lay["hint"]
