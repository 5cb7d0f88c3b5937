"""Issue 25: the check on an H200-shaped machine (driver 580 / CUDA 13.0, Python 3.12 in a venv with
the CUDA wheels), against stubs as unkind as the real libraries: defects 3, 6, 11, 12, 15."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

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
