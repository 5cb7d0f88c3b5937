"""Real shared libraries, built with gcc, exporting the C symbols the GPU check calls.

They stand in for the driver's libcuda.so.1 and libnvidia-ml.so.1 and the env's libcudart,
libcudnn (8, and 9 with its sub-libraries) and libcublas of CUDA 12 and 13, so the check's ctypes
code and error paths run for real without a GPU. They are strict as the real ones are (see
tests/support/stub_sources.py): host pointers, bad handles and leading dimensions are refused.
Behaviour is chosen per run through environment variables (one build serves every test):

  CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER   applied as CUDA does ("" -> cuInit gives 100)
  STUB_CU_INIT_ERROR=N        cuInit returns N (e.g. 100 CUDA_ERROR_NO_DEVICE, 3 NOT_INITIALIZED)
  STUB_CU_INIT_CRASH=1        cuInit raises SIGSEGV; STUB_CU_INIT_HANG=1: cuInit never returns
  STUB_CU_DEVICES=N           devices the driver reports (default 1)
  STUB_CU_DRIVER_VERSION=N    cuDriverGetVersion (default 12040)
  STUB_CU_CC=MAJ.MIN          compute capability (default 8.6)
  STUB_CU_PCI=a,b             PCI bus id per GPU in CUDA's default order (default 0000:01:00.0, ...);
                              UUIDs derive from it; NVML numbers the same GPUs by bus id
  STUB_CU_DRIVER_VERSION_ERROR=N / STUB_CU_NAME_ERROR=N   cuDriverGetVersion / cuDeviceGetName return N
  STUB_MIG=1                  every GPU is in MIG mode (cuDeviceGetUuid_v2 gives MIG- UUIDs; NVML
                              utilisation not supported)
  STUB_NVML_INIT_ERROR=N / STUB_NVML_SAMPLE_ERROR=N / STUB_NVML_TEMP=C / STUB_NVML_THROTTLE=BITS
  STUB_NVML_HANDLE_ERROR=I:RC  nvmlDeviceGetHandleByIndex(I) returns RC (4 no permission, 15 GPU lost)
  STUB_CUDNN_CREATE_ERROR=N   cudnnCreate returns N (cudnnGetCudartVersion is fixed per build, as in the
                              real library: cuDNN 8 for 12.3 in env/, for 11.8 in cudnn-cu11/; cuDNN 9.3 for
                              12.6 in env/, 9.13 for 13.0 in cudnn-cu13/). cuDNN 9 stubs abort in their first
                              call when libcudnn_graph.so.9 is missing, and use cuDNN 9's status numbers
                              (1001 NOT_INITIALIZED, 2000 BAD_PARAM, 4000 INTERNAL_ERROR, 5003 ..._CUDA_DRIVER);
                              an unknown status is "CUDNN_UNKNOWN_STATUS", as cudnnGetErrorString says.
  STUB_CU_COMPUTE_MODE=N      CU_DEVICE_ATTRIBUTE_COMPUTE_MODE (0 default, 2 prohibited, 3 exclusive-process)
  STUB_CU_EXCLUSIVE_BUSY=1    another process holds the exclusive-process GPU: contexts cannot be made
                              (cuCtxCreate / cudaFree(0): 46 device unavailable; cudnnCreate fails)
  STUB_CUDART_VERSION=N       cudaRuntimeGetVersion (default 12030)
  STUB_CUDART_COUNT_ERROR=N   cudaGetDeviceCount returns N (e.g. 35 cudaErrorInsufficientDriver)
  STUB_CUDNN_VERSION=N        cudnnGetVersion (default 8907)
  STUB_CUBLAS_CREATE_ERROR=N  cublasCreate_v2 returns N (e.g. 1 CUBLAS_STATUS_NOT_INITIALIZED)
  STUB_CUBLAS_WRONG=1         cublasSgemm_v2 returns a wrong result (a faulty GPU)
  STUB_CUBLAS_SGEMM_US=N      every product takes N microseconds of device time (a known kernel time), queued
                              on the device as a real launch is: the call returns at once, events record when the
                              queue reaches them, a synchronous copy or event wait waits; a product whose inputs
                              were not written since is copied, not recomputed
  STUB_CUBLAS_WRONG_AT=N / STUB_CUBLAS_WRONG_FROM=N / STUB_CUBLAS_WRONG_DEVICE=D   the Nth product (or every one
                              from the Nth on) is wrong, on device D only when set
  STUB_CU_FREE_MIB=N / STUB_CU_L2_MIB=N   cudaMemGetInfo's free memory (default 64) / the L2 size (default 6)
  STUB_CUDART_CTX_ERROR=D:RC  making a context on device D fails with RC (804, 999 ...)
  STUB_CUDNN_ALGOS=0,1,...    the convolution algorithms cuDNN supports (default 0,1,2,6); STUB_CUDNN_NO_ENGINE=1:
                              none; STUB_CUDNN_CONV_ERROR=ALGO:STATUS / STUB_CUDNN_CONV_WRONG=ALGO: that algorithm
                              fails / computes a wrong element (on STUB_CUDNN_FAULT_DEVICE only, when set); cuDNN
                              >= 9.11 (STUB_CUDNN_VERSION) offers nothing on cc < 7.5 (NOT_SUPPORTED_ARCH_MISMATCH)
  STUB_NVML_MEM_TEMP / STUB_NVML_SM_MHZ / STUB_NVML_SLOWDOWN_C / STUB_NVML_PROCS=GPU:PID:MIB,...   HBM temperature,
                              SM clock, slowdown threshold, compute processes per GPU
  STUB_NVML_ECC_UNCORRECTED / _CORRECTED / _RISE / _OFF, STUB_NVML_REMAP_PENDING / _FAILURE / _UNC,
  STUB_NVML_RETIRED / _PENDING   health counters (tests/support/stub_sources.py), on STUB_NVML_FAULT_GPU only when set
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.support import stub_sources as src

CHECK_SCRIPT = Path(__file__).resolve().parents[2] / "tfgpu_install" / "verify" / "gpucheck" / "check.py"
CPU_SEAM = Path(__file__).resolve().parent / "check_on_cpu.py"

# cuDNN 9's run-time loaded sub-libraries, as the nvidia-cudnn-cu12 9.3.0.75 / 9.8.0.87 wheels' RECORD list them.
CUDNN9_SUBLIBS = ("libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
                  "libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9")

# soname -> (C source, sub-directory, extra compiler flags)
SOURCES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "libcuda.so.1": (src.LIBCUDA, "driver", ()),
    "libnvidia-ml.so.1": (src.LIBNVML, "driver", ()),
    "libcudart.so.12": (src.LIBCUDART, "env", ()),
    "libcudnn.so.8": (src.LIBCUDNN, "env", ()),
    "libcudnn.so.9": (src.LIBCUDNN, "env", ("-DCUDNN_DEFAULT=90300", "-DCUDNN_CUDART=12060")),
    "libcublas.so.12": (src.LIBCUBLAS, "env", ()),
    "libcudart.so.13": (src.LIBCUDART, "cu13", ("-DCUDART_DEFAULT=13000",)),
    "libcublas.so.13": (src.LIBCUBLAS, "cu13", ()),
    "libnvrtc.so.13": (src.CUDNN_SUB, "cu13", ()),  # present, as the nvidia-cuda-nvrtc wheel puts it beside cuBLAS
    **{so: (src.CUDNN_SUB, "env", ()) for so in CUDNN9_SUBLIBS},
    # cuDNN builds for other CUDA majors (cudnnGetCudartVersion is fixed when the library is built)
    "cu11/libcudnn.so.8": (src.LIBCUDNN, "cudnn-cu11", ("-DCUDNN_CUDART=11080",)),
    "cu13/libcudnn.so.9": (src.LIBCUDNN, "cudnn-cu13", ("-DCUDNN_DEFAULT=91300", "-DCUDNN_CUDART=13000",
                                                         "-DCUDNN_MAX_SM=1200")),
    **{f"cu13/{so}": (src.CUDNN_SUB, "cudnn-cu13", ()) for so in CUDNN9_SUBLIBS},
}


@dataclass(frozen=True)
class StubLibs:
    """Where the built libraries lie: `driver` holds libcuda.so.1 and libnvidia-ml.so.1 (goes on
    LD_LIBRARY_PATH, as the driver's do), `env` the CUDA 12 runtime, cuDNN 8/9 (with cuDNN 9's
    sub-libraries) and cuBLAS (a placed library dir), `cu13` CUDA 13's libcudart.so.13 and libcublas.so.13."""

    driver: Path
    env: Path
    cu13: Path
    cudnn_cu11: Path  # libcudnn.so.8 built for CUDA 11.8
    cudnn_cu13: Path  # libcudnn.so.9 (9.13, native up to sm_120) built for CUDA 13.0, with its sub-libraries


def build_stub_libs(dest: Path) -> StubLibs:
    """Compile every stub into dest/{driver,env,cu13} (reused when already built from these sources)."""
    if shutil.which("gcc") is None:
        raise RuntimeError("gcc is needed to build the stub CUDA libraries")
    for key, (code, sub, flags) in SOURCES.items():
        soname = key.rsplit("/", 1)[-1]
        out = dest / sub / soname
        out.parent.mkdir(parents=True, exist_ok=True)
        stamp = out.with_name(out.name + ".sha")
        digest = hashlib.sha256((code + " ".join(flags)).encode()).hexdigest()
        if out.exists() and stamp.exists() and stamp.read_text() == digest:
            continue
        c_file = dest / (key.replace(".", "_").replace("/", "_") + ".c")
        c_file.write_text(code)
        tmp = out.with_name(out.name + ".tmp")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-pthread", *flags, f"-Wl,-soname,{soname}", "-o",
                        str(tmp), str(c_file), "-ldl", "-lm"], check=True, capture_output=True)
        os.replace(tmp, out)
        stamp.write_text(digest)
    return StubLibs(driver=dest / "driver", env=dest / "env", cu13=dest / "cu13", cudnn_cu11=dest / "cudnn-cu11",
                    cudnn_cu13=dest / "cudnn-cu13")


def plant_pci(root: Path, devices: list[tuple[str, str, str]], driver: str = "nvidia") -> None:
    """A /sys/bus/pci/devices tree under root: (address, vendor, class) per device, as the kernel lays
    it out (the driver link points into /sys/bus/pci/drivers/<name>)."""
    base = root / "sys/bus/pci/devices"
    base.mkdir(parents=True, exist_ok=True)
    drivers = root / "sys/bus/pci/drivers" / driver
    drivers.mkdir(parents=True, exist_ok=True)
    for address, vendor, cls in devices:
        d = base / address
        d.mkdir(parents=True, exist_ok=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
        (d / "device").write_text("0x2204\n")
        if vendor == "0x10de":
            link = d / "driver"
            if not link.is_symlink():
                link.symlink_to(drivers)


def run_check(args: list[str], env: Optional[dict[str, str]] = None, python: str = sys.executable,
              timeout: float = 300, script: Path = CHECK_SCRIPT) -> dict[str, Any]:
    """Run check.py as the host does (a subprocess); its stdout must be exactly one JSON document.
    `script=CPU_SEAM` runs it through tests/support/check_on_cpu.py (TensorFlow layers on /CPU:0)."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    full.update(env or {})
    proc = subprocess.run([python, str(script), *args], env=full, capture_output=True, text=True,
                          timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout is not one JSON document:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    doc = json.loads(lines[0])
    assert proc.returncode == (0 if doc["ok"] else 1), proc.stderr
    doc["_stderr"] = proc.stderr
    return doc


def layer(doc: dict[str, Any], which: "int | str") -> dict[str, Any]:
    """A layer of the check's report, by name (or by its number in the JSON)."""
    key = "name" if isinstance(which, str) else "layer"
    return next(lay for lay in doc["layers"] if lay[key] == which)



_BUILT: dict[str, StubLibs] = {}


@pytest.fixture(scope="session")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> StubLibs:
    """The stub libraries, built once per session (import this fixture into a test module)."""
    if "libs" not in _BUILT:
        _BUILT["libs"] = build_stub_libs(tmp_path_factory.mktemp("stublibs"))
    return _BUILT["libs"]
