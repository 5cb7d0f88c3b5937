"""Real shared libraries, built with gcc, exporting the C symbols the GPU check calls.

They stand in for the driver's libcuda.so.1 and the env's libcudart.so.12, libcudnn.so.{8,9}
and libcublas.so.12, so the check's ctypes code and error paths run for real without a GPU.
Behaviour is chosen per run through environment variables (one build serves every test):

  STUB_CU_INIT_ERROR=N        cuInit returns N (e.g. 100 CUDA_ERROR_NO_DEVICE, 3 NOT_INITIALIZED)
  STUB_CU_INIT_CRASH=1        cuInit raises SIGSEGV; STUB_CU_INIT_HANG=1: cuInit never returns
  STUB_CU_DEVICES=N           devices the driver reports (default 1)
  STUB_CU_DRIVER_VERSION=N    cuDriverGetVersion (default 12040)
  STUB_CU_CC=MAJ.MIN          compute capability (default 8.6)
  STUB_CU_PCI=a,b             PCI bus id per CUDA ordinal (default 0000:01:00.0, 0000:02:00.0, ...)
  STUB_CUDART_VERSION=N       cudaRuntimeGetVersion (default 12030)
  STUB_CUDART_COUNT_ERROR=N   cudaGetDeviceCount returns N (e.g. 35 cudaErrorInsufficientDriver)
  STUB_CUDNN_VERSION=N        cudnnGetVersion (default 8907)
  STUB_CUBLAS_CREATE_ERROR=N  cublasCreate_v2 returns N (e.g. 1 CUBLAS_STATUS_NOT_INITIALIZED)
  STUB_CUBLAS_WRONG=1         cublasSgemm_v2 returns a wrong result (a faulty GPU)
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

CHECK_SCRIPT = Path(__file__).resolve().parents[2] / "installer" / "verify" / "gpucheck" / "check.py"

_COMMON = r"""
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <signal.h>
#include <unistd.h>
static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return (v && *v) ? atoi(v) : dflt;
}
"""

LIBCUDA = _COMMON + r"""
static int inited = 0;
int cuInit(unsigned int flags) {
    if (env_int("STUB_CU_INIT_CRASH", 0)) raise(SIGSEGV);  /* a driver that kills its caller */
    if (env_int("STUB_CU_INIT_HANG", 0)) sleep(3600);      /* a wedged driver */
    int rc = env_int("STUB_CU_INIT_ERROR", 0);
    if (rc == 0) inited = 1;
    return rc;
}
int cuDriverGetVersion(int *v) { *v = env_int("STUB_CU_DRIVER_VERSION", 12040); return 0; }
int cuDeviceGetCount(int *n) {
    if (!inited) return 3; /* CUDA_ERROR_NOT_INITIALIZED, as the real driver */
    *n = env_int("STUB_CU_DEVICES", 1);
    return 0;
}
int cuDeviceGet(int *dev, int ordinal) {
    if (!inited) return 3;
    if (ordinal >= env_int("STUB_CU_DEVICES", 1)) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}
int cuDeviceGetName(char *name, int len, int dev) {
    snprintf(name, len, "Stub GPU %d", dev);
    return 0;
}
int cuDeviceGetAttribute(int *value, int attrib, int dev) {
    const char *cc = getenv("STUB_CU_CC");
    int maj = 8, min = 6;
    if (cc && *cc) sscanf(cc, "%d.%d", &maj, &min);
    if (attrib == 75) { *value = maj; return 0; }
    if (attrib == 76) { *value = min; return 0; }
    return 1;
}
int cuDeviceTotalMem_v2(size_t *bytes, int dev) { *bytes = (size_t)8 << 30; return 0; }
int cuDeviceGetPCIBusId(char *out, int len, int dev) {
    const char *ids = getenv("STUB_CU_PCI");
    if (ids && *ids) {
        const char *p = ids;
        for (int i = 0; i < dev && p; i++) { p = strchr(p, ','); if (p) p++; }
        if (!p) return 101;
        int n = 0;
        while (p[n] && p[n] != ',' && n < len - 1) { out[n] = p[n]; n++; }
        out[n] = 0;
        return 0;
    }
    snprintf(out, len, "0000:%02X:00.0", dev + 1);
    return 0;
}
"""

LIBCUDART = _COMMON + r"""
int cudaRuntimeGetVersion(int *v) { *v = env_int("STUB_CUDART_VERSION", 12030); return 0; }
int cudaGetDeviceCount(int *n) {
    int rc = env_int("STUB_CUDART_COUNT_ERROR", 0);
    if (rc) return rc;
    *n = env_int("STUB_CU_DEVICES", 1);
    return 0;
}
/* "Device" memory is host memory: the stub cuBLAS computes on the CPU. */
int cudaMalloc(void **p, size_t size) { *p = malloc(size); return *p ? 0 : 2; }
int cudaFree(void *p) { free(p); return 0; }
int cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    if (kind < 0 || kind > 4) return 21; /* cudaErrorInvalidMemcpyDirection */
    memcpy(dst, src, count);
    return 0;
}
"""

LIBCUDNN = _COMMON + r"""
size_t cudnnGetVersion(void) { return (size_t)env_int("STUB_CUDNN_VERSION", 8907); }
"""

LIBCUBLAS = _COMMON + r"""
int cublasCreate_v2(void **handle) {
    int rc = env_int("STUB_CUBLAS_CREATE_ERROR", 0);
    if (rc) return rc;
    *handle = malloc(16);
    return 0;
}
int cublasDestroy_v2(void *handle) { free(handle); return 0; }
/* Column-major C = alpha*A*B + beta*C, no transposes (all the check asks for). */
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A, int lda,
                   const float *B, int ldb, const float *beta, float *C, int ldc) {
    if (ta != 0 || tb != 0) return 15; /* CUBLAS_STATUS_NOT_SUPPORTED */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) s += A[p * lda + i] * B[j * ldb + p];
            C[j * ldc + i] = (*alpha) * s + (*beta) * C[j * ldc + i];
        }
    if (env_int("STUB_CUBLAS_WRONG", 0)) C[0] += 1.0f;
    return 0;
}
"""

SOURCES = {
    "libcuda.so.1": LIBCUDA,
    "libcudart.so.12": LIBCUDART,
    "libcudnn.so.8": LIBCUDNN,
    "libcudnn.so.9": LIBCUDNN,
    "libcublas.so.12": LIBCUBLAS,
}


@dataclass(frozen=True)
class StubLibs:
    """Where the built libraries lie: `driver` holds libcuda.so.1 (goes on LD_LIBRARY_PATH, as the
    driver's does), `env` holds the CUDA/cuDNN/cuBLAS libraries (a placed library dir)."""

    driver: Path
    env: Path


def build_stub_libs(dest: Path) -> StubLibs:
    """Compile every stub into dest/driver and dest/env (reused when already built from these sources)."""
    if shutil.which("gcc") is None:
        raise RuntimeError("gcc is needed to build the stub CUDA libraries")
    driver, env = dest / "driver", dest / "env"
    driver.mkdir(parents=True, exist_ok=True)
    env.mkdir(parents=True, exist_ok=True)
    for soname, src in SOURCES.items():
        out = (driver if soname.startswith("libcuda.") else env) / soname
        stamp = out.with_name(out.name + ".sha")
        digest = hashlib.sha256(src.encode()).hexdigest()
        if out.exists() and stamp.exists() and stamp.read_text() == digest:
            continue
        c_file = dest / (soname.replace(".", "_") + ".c")
        c_file.write_text(src)
        tmp = out.with_name(out.name + ".tmp")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-Wl,-soname,{soname}", "-o", str(tmp), str(c_file)],
                       check=True, capture_output=True)
        os.replace(tmp, out)
        stamp.write_text(digest)
    return StubLibs(driver=driver, env=env)


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
              timeout: float = 300) -> dict[str, Any]:
    """Run check.py as the host does (a subprocess); its stdout must be exactly one JSON document."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    full.update(env or {})
    proc = subprocess.run([python, str(CHECK_SCRIPT), *args], env=full, capture_output=True, text=True,
                          timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout is not one JSON document:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    doc = json.loads(lines[0])
    assert proc.returncode == (0 if doc["ok"] else 1), proc.stderr
    doc["_stderr"] = proc.stderr
    return doc


def layer(doc: dict[str, Any], num: int) -> dict[str, Any]:
    return next(lay for lay in doc["layers"] if lay["layer"] == num)



_BUILT: dict[str, StubLibs] = {}


@pytest.fixture(scope="session")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> StubLibs:
    """The stub libraries, built once per session (import this fixture into a test module)."""
    if "libs" not in _BUILT:
        _BUILT["libs"] = build_stub_libs(tmp_path_factory.mktemp("stublibs"))
    return _BUILT["libs"]
