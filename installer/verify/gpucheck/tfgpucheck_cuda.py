"""Layers 0-4 of the GPU check: PCI bus, driver, CUDA runtime, cuDNN, cuBLAS, through ctypes.

Runs inside the target environment, imported by check.py from its own directory: stdlib
and ctypes only (numpy is used for the SGEMM reference when the env has it). Nothing here
imports from `installer` because the target env does not have our package.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sysconfig
from typing import Any, Optional

# Real codes from cuda.h / driver_types.h / cublas_api.h: reported by name, never as bare numbers.
CU_RESULT = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    802: "CUDA_ERROR_SYSTEM_NOT_READY", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}
CUDA_ERROR = {
    0: "cudaSuccess", 1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation",
    3: "cudaErrorInitializationError", 4: "cudaErrorCudartUnloading", 34: "cudaErrorStubLibrary",
    35: "cudaErrorInsufficientDriver", 36: "cudaErrorCallRequiresNewerDriver",
    46: "cudaErrorDevicesUnavailable", 100: "cudaErrorNoDevice", 101: "cudaErrorInvalidDevice",
    209: "cudaErrorNoKernelImageForDevice", 222: "cudaErrorUnsupportedPtxVersion",
    802: "cudaErrorSystemNotReady", 803: "cudaErrorSystemDriverMismatch",
    804: "cudaErrorCompatNotSupportedOnDevice", 999: "cudaErrorUnknown",
}
CUBLAS_STATUS = {
    0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}
HINTS = {
    "CUDA_ERROR_NO_DEVICE": "the driver sees no usable GPU: check CUDA_VISIBLE_DEVICES, `nvidia-smi`, and in a "
    "container run with `--gpus all`",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the kernel module and libcuda differ (driver upgraded without a "
    "reboot): reboot, or reload the nvidia modules",
    "CUDA_ERROR_NOT_INITIALIZED": "cuInit failed: check `nvidia-smi` and `dmesg | grep -i nvrm`",
    "CUDA_ERROR_STUB_LIBRARY": "a stub libcuda (from a CUDA toolkit's lib64/stubs) is on the library path ahead "
    "of the driver's: remove that directory from LD_LIBRARY_PATH",
    "cudaErrorInsufficientDriver": "the NVIDIA driver is older than this CUDA runtime (or absent): upgrade the "
    "driver, or re-run `tfgpu-install` so it picks a CUDA this driver supports",
    "cudaErrorNoDevice": "the CUDA runtime sees no GPU: check CUDA_VISIBLE_DEVICES and `nvidia-smi`",
    "cudaErrorSystemDriverMismatch": "driver upgraded without a reboot: reboot",
    "cudaErrorStubLibrary": "a stub libcuda is on the library path: remove lib64/stubs from LD_LIBRARY_PATH",
    "CUBLAS_STATUS_NOT_INITIALIZED": "cuBLAS could not initialise the GPU (no driver, or the GPU is busy or "
    "out of memory): check `nvidia-smi`",
    "CUBLAS_STATUS_ARCH_MISMATCH": "this cuBLAS has no kernels for the GPU's architecture",
}


def code_name(table: dict[int, str], code: int, lib: Any = None, namer: str = "") -> str:
    """The code's name: from the library itself when it exports a namer, else the table."""
    fn = getattr(lib, namer, None) if lib is not None and namer else None
    if fn is not None:
        try:
            fn.restype = ctypes.c_char_p
            if namer == "cuGetErrorName":
                out = ctypes.c_char_p()
                if fn(code, ctypes.byref(out)) == 0 and out.value:
                    return out.value.decode()
            else:
                name = fn(code)
                if name:
                    return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # a namer that misbehaves must not hide the real code
            pass
    return table.get(code, f"unknown error {code}")


def outcome(status: str, summary: str, measured: Optional[dict[str, Any]] = None, *,
            error: Optional[dict[str, Any]] = None, hint: Optional[str] = None) -> dict[str, Any]:
    return {"status": status, "summary": summary, "measured": measured or {}, "error": error, "hint": hint}


def _err(code: int, name: str) -> dict[str, Any]:
    return {"code": code, "name": name}


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


# ---- layer 0 -------------------------------------------------------------------------------------
def layer_hardware(root: str) -> dict[str, Any]:
    """An NVIDIA display/3D controller (vendor 0x10de, class 0x03xxxx) on the PCI bus."""
    base = os.path.join(root, "sys/bus/pci/devices")
    gpus = []
    for dev in sorted(glob.glob(os.path.join(base, "*"))):
        if _read(os.path.join(dev, "vendor")).lower() != "0x10de":
            continue
        cls = _read(os.path.join(dev, "class")).lower()
        if not cls.startswith("0x03"):
            continue  # the card's audio function (0x0403) is not a GPU
        drv = os.path.join(dev, "driver")
        driver = os.path.basename(os.path.realpath(drv)) if os.path.lexists(drv) else None
        gpus.append({"pci": os.path.basename(dev).lower(), "device_id": _read(os.path.join(dev, "device")),
                     "class": cls, "kernel_driver": driver})
    if gpus:
        drivers = sorted({g["kernel_driver"] or "none" for g in gpus})
        summary = f"{len(gpus)} NVIDIA GPU(s) on the PCI bus (kernel driver: {', '.join(drivers)})"
        hint = None
        if "nouveau" in drivers:
            hint = "the nouveau driver holds the GPU: install the NVIDIA driver and blacklist nouveau"
        return outcome("pass", summary, {"gpus": gpus}, hint=hint)
    # Some containers hide /sys/bus/pci; the driver's own view (/proc/driver/nvidia/gpus/<pci>) and
    # device nodes still show a GPU that the container was given.
    proc_gpus = sorted(os.path.basename(p).lower() for p in glob.glob(os.path.join(root, "proc/driver/nvidia/gpus/*")))
    nodes = sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, "dev/nvidia[0-9]*")))
    if proc_gpus or nodes:
        seen = proc_gpus or nodes
        return outcome("pass", f"{len(seen)} NVIDIA GPU(s) from the driver ({', '.join(seen)}); the PCI bus is "
                       "not visible here", {"gpus": [{"pci": p} for p in proc_gpus], "device_nodes": nodes})
    # WSL2 exposes the GPU through /dev/dxg and its own libcuda, not through PCI.
    if os.path.exists(os.path.join(root, "dev/dxg")) and os.path.exists(
            os.path.join(root, "usr/lib/wsl/lib/libcuda.so.1")):
        return outcome("pass", "WSL2 GPU paravirtualisation (/dev/dxg, /usr/lib/wsl/lib)", {"wsl2": True})
    return outcome("fail", f"no NVIDIA GPU on the PCI bus ({base}: no vendor 0x10de display controller)",
                   {"gpus": []},
                   hint="this machine has no NVIDIA GPU visible: in a VM or container pass the GPU through "
                   "(docker run --gpus all); for a CPU-only env install with --allow-cpu")


# ---- library loading -----------------------------------------------------------------------------
def site_dirs() -> list[str]:
    out = []
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p and p not in out:
            out.append(p)
    return out


def search_dirs(plan: dict[str, Any], nvidia_pkg: str) -> list[str]:
    """Where the env keeps a library: the plan's placed dirs first, then <site>/nvidia/<pkg>/lib."""
    dirs = [str(d) for d in plan.get("lib_dirs", [])]
    dirs += [os.path.join(s, "nvidia", nvidia_pkg, "lib") for s in site_dirs()]
    return dirs


def loaded_path(soname: str) -> Optional[str]:
    """Where the loader really found a library (it may not be where we expected)."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ""
                if os.path.basename(path).startswith(soname):
                    return path
    except OSError:
        pass
    return None


def load_library(sonames: list[str], dirs: list[str]) -> tuple[Optional[Any], str, list[str]]:
    """(lib, path, errors): first soname found in dirs (absolute path), else through the loader."""
    errors: list[str] = []
    for d in dirs:
        for so in sonames:
            path = os.path.join(d, so)
            if os.path.exists(path):
                try:
                    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path, errors
                except OSError as exc:
                    errors.append(str(exc))
    for so in sonames:
        try:
            lib = ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)
            return lib, loaded_path(so) or so, errors
        except OSError as exc:
            errors.append(str(exc))
    return None, "", errors


def _major(version: Optional[str]) -> Optional[int]:
    try:
        return int(str(version).split(".")[0]) if version else None
    except ValueError:
        return None


def cuda_int(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def cudnn_int(v: int) -> str:
    # cuDNN 9 encodes major*10000 + minor*100 + patch; 8 and older major*1000 + minor*100 + patch.
    if v >= 90000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def version_matches(actual: str, expected: str) -> bool:
    """'8.9.7' matches '8.9.7.29' and '8.9': compare the components both name."""
    a, e = actual.split("."), str(expected).split(".")
    n = min(len(a), len(e))
    return n > 0 and a[:n] == e[:n]


# ---- layer 1 -------------------------------------------------------------------------------------
def layer_driver(plan: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    names = [plan["libcuda"]] if plan.get("libcuda") else ["libcuda.so.1"]
    lib, path, errors = load_library(names, [])
    if lib is None:
        return outcome("fail", f"libcuda.so.1 did not load: {errors[-1] if errors else 'not found'}",
                       hint="install the NVIDIA driver (it provides libcuda.so.1); on WSL2 keep "
                       "/usr/lib/wsl/lib on the library path")
    measured: dict[str, Any] = {"libcuda": path}
    rc = lib.cuInit(0)
    if rc != 0:
        name = code_name(CU_RESULT, rc, lib, "cuGetErrorName")
        hint = HINTS.get(name)
        if name == "CUDA_ERROR_NO_DEVICE" and "CUDA_VISIBLE_DEVICES" in os.environ:
            hint = f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} hides the GPUs: unset it or " \
                   "name an existing GPU"
        return outcome("fail", f"cuInit failed: {name} ({rc})", measured, error=_err(rc, name), hint=hint)
    ver = ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(ver))
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    measured["driver_cuda"] = cuda_int(ver.value)
    if rc != 0 or count.value == 0:
        rc = rc or 100
        name = code_name(CU_RESULT, rc, lib, "cuGetErrorName")
        return outcome("fail", f"the driver reports no CUDA device: {name} ({rc})", measured,
                       error=_err(rc, name), hint=HINTS.get("CUDA_ERROR_NO_DEVICE"))
    devices = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        lib.cuDeviceGet(ctypes.byref(dev), i)
        buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(buf, 256, dev)
        info: dict[str, Any] = {"index": i, "name": buf.value.decode(errors="replace")}
        cc_major, cc_minor = ctypes.c_int(0), ctypes.c_int(0)
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
        if lib.cuDeviceGetAttribute(ctypes.byref(cc_major), 75, dev) == 0 and \
                lib.cuDeviceGetAttribute(ctypes.byref(cc_minor), 76, dev) == 0:
            info["compute_capability"] = f"{cc_major.value}.{cc_minor.value}"
        mem = ctypes.c_size_t(0)
        if hasattr(lib, "cuDeviceTotalMem_v2") and lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev) == 0:
            info["memory_mib"] = mem.value // (1024 * 1024)
        bus = ctypes.create_string_buffer(64)
        if hasattr(lib, "cuDeviceGetPCIBusId") and lib.cuDeviceGetPCIBusId(bus, 64, dev) == 0:
            info["pci"] = bus.value.decode().lower()
        devices.append(info)
    measured["devices"] = devices
    state["devices"] = devices
    desc = ", ".join(f"{d['name']} (cc {d.get('compute_capability', '?')})" for d in devices)
    return outcome("pass", f"driver supports CUDA {measured['driver_cuda']}; {len(devices)} device(s): {desc}",
                   measured)


# ---- layer 2 -------------------------------------------------------------------------------------
def _sonames(base: str, major: Optional[int], table: dict[int, list[str]]) -> list[str]:
    if major in table:
        return table[major]
    return [so for sos in sorted(table.items(), reverse=True) for so in sos[1]] + [base]


def layer_runtime(plan: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    sonames = _sonames("libcudart.so", _major(plan.get("cuda")), {12: ["libcudart.so.12"], 11: ["libcudart.so.11.0"]})
    lib, path, errors = load_library(sonames, search_dirs(plan, "cuda_runtime"))
    if lib is None:
        return outcome("fail", f"{sonames[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint=f"the env has no CUDA runtime {plan.get('cuda') or ''}: re-run `tfgpu-install` to "
                       "reinstall the nvidia-cuda-runtime wheel")
    state["cudart"] = lib
    measured: dict[str, Any] = {"libcudart": path}
    ver = ctypes.c_int(0)
    lib.cudaRuntimeGetVersion(ctypes.byref(ver))
    measured["runtime_cuda"] = cuda_int(ver.value)
    want = _major(plan.get("cuda"))
    if want is not None and _major(measured["runtime_cuda"]) != want:
        return outcome("fail", f"CUDA runtime {measured['runtime_cuda']} but the plan placed CUDA {plan['cuda']}",
                       measured, hint="re-run `tfgpu-install` to reinstall the planned CUDA wheels")
    count = ctypes.c_int(0)
    rc = lib.cudaGetDeviceCount(ctypes.byref(count))
    if rc != 0:
        name = code_name(CUDA_ERROR, rc, lib, "cudaGetErrorName")
        return outcome("fail", f"cudaGetDeviceCount failed: {name} ({rc}) with CUDA runtime "
                       f"{measured['runtime_cuda']}", measured, error=_err(rc, name), hint=HINTS.get(name))
    measured["device_count"] = count.value
    return outcome("pass", f"CUDA runtime {measured['runtime_cuda']} ({path}) sees {count.value} device(s)",
                   measured)


# ---- layer 3 -------------------------------------------------------------------------------------
def layer_cudnn(plan: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    sonames = _sonames("libcudnn.so", _major(plan.get("cudnn")), {9: ["libcudnn.so.9"], 8: ["libcudnn.so.8"]})
    lib, path, errors = load_library(sonames, search_dirs(plan, "cudnn"))
    if lib is None:
        return outcome("fail", f"{sonames[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint="cuDNN is missing from the env: re-run `tfgpu-install` (or pass --cudnn-source)")
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    version = cudnn_int(int(lib.cudnnGetVersion()))
    measured = {"libcudnn": path, "cudnn": version}
    expected = plan.get("cudnn")
    if expected and not version_matches(version, str(expected)):
        return outcome("fail", f"cuDNN {version} loaded from {path}, but the plan placed {expected}", measured,
                       hint="another cuDNN comes first on the library path: `tfgpu-install doctor` lists stale "
                       "copies; re-run the install with --quarantine-stale")
    return outcome("pass", f"cuDNN {version} ({path})" + (f" as planned ({expected})" if expected else ""),
                   measured)


# ---- layer 4 -------------------------------------------------------------------------------------
def _matrices(m: int, k: int, n: int) -> tuple[list[float], list[float]]:
    # Small exact values (multiples of 1/4): float32 sums stay exact, so any difference is a real error.
    a = [((i * 7) % 9 - 4) / 4.0 for i in range(m * k)]
    b = [((i * 5) % 11 - 5) / 4.0 for i in range(k * n)]
    return a, b


def reference_sgemm(a: list[float], b: list[float], m: int, k: int, n: int) -> list[float]:
    """C = A.B with column-major A (m x k), B (k x n), as cuBLAS computes it."""
    try:
        import numpy as np

        am = np.array(a, dtype=np.float64).reshape(k, m).T
        bm = np.array(b, dtype=np.float64).reshape(n, k).T
        return [float(x) for x in (am @ bm).T.reshape(-1)]
    except ImportError:
        c = [0.0] * (m * n)
        for j in range(n):
            for p in range(k):
                bv = b[j * k + p]
                if bv:
                    for i in range(m):
                        c[j * m + i] += a[p * m + i] * bv
        return c


def layer_cublas(plan: dict[str, Any], state: dict[str, Any], size: int = 64) -> dict[str, Any]:
    cudart = state.get("cudart")
    if cudart is None:
        return outcome("skip", "needs the CUDA runtime (layer 2)")
    sonames = _sonames("libcublas.so", _major(plan.get("cuda")), {12: ["libcublas.so.12"], 11: ["libcublas.so.11"]})
    lib, path, errors = load_library(sonames, search_dirs(plan, "cublas"))
    if lib is None:
        return outcome("fail", f"{sonames[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint="re-run `tfgpu-install` to reinstall the nvidia-cublas wheel")
    measured: dict[str, Any] = {"libcublas": path, "m": size, "n": size, "k": size}
    m = n = k = size
    handle = ctypes.c_void_p()
    rc = lib.cublasCreate_v2(ctypes.byref(handle))
    if rc != 0:
        name = code_name(CUBLAS_STATUS, rc, lib, "cublasGetStatusName")
        return outcome("fail", f"cublasCreate failed: {name} ({rc})", measured, error=_err(rc, name),
                       hint=HINTS.get(name))
    ptrs: list[ctypes.c_void_p] = []
    try:
        a, b = _matrices(m, k, n)
        host = [(ctypes.c_float * len(a))(*a), (ctypes.c_float * len(b))(*b), (ctypes.c_float * (m * n))()]
        for arr in host:
            p = ctypes.c_void_p()
            rc = cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(ctypes.sizeof(arr)))
            if rc != 0:
                name = code_name(CUDA_ERROR, rc, cudart, "cudaGetErrorName")
                return outcome("fail", f"cudaMalloc failed: {name} ({rc})", measured, error=_err(rc, name))
            ptrs.append(p)
        for p, arr in zip(ptrs[:2], host[:2]):
            rc = cudart.cudaMemcpy(p, arr, ctypes.c_size_t(ctypes.sizeof(arr)), 1)  # cudaMemcpyHostToDevice
            if rc != 0:
                name = code_name(CUDA_ERROR, rc, cudart, "cudaGetErrorName")
                return outcome("fail", f"cudaMemcpy to the GPU failed: {name} ({rc})", measured,
                               error=_err(rc, name))
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        rc = lib.cublasSgemm_v2(handle, 0, 0, m, n, k, ctypes.byref(alpha), ptrs[0], m, ptrs[1], k,
                                ctypes.byref(beta), ptrs[2], m)
        if rc != 0:
            name = code_name(CUBLAS_STATUS, rc, lib, "cublasGetStatusName")
            return outcome("fail", f"cublasSgemm failed: {name} ({rc})", measured, error=_err(rc, name),
                           hint=HINTS.get(name))
        rc = cudart.cudaMemcpy(host[2], ptrs[2], ctypes.c_size_t(ctypes.sizeof(host[2])), 2)  # DeviceToHost
        if rc != 0:
            name = code_name(CUDA_ERROR, rc, cudart, "cudaGetErrorName")
            return outcome("fail", f"cudaMemcpy from the GPU failed: {name} ({rc})", measured, error=_err(rc, name))
        ref = reference_sgemm(a, b, m, k, n)
        err = max(abs(x - y) for x, y in zip(host[2], ref))
        scale = max(1.0, max(abs(y) for y in ref))
        measured["max_abs_error"] = err
        if err > 1e-4 * scale:
            return outcome("fail", f"SGEMM {m}x{n}x{k} on the GPU differs from the reference (max error {err:g})",
                           measured, hint="the GPU computes wrong results: check `nvidia-smi -q` for ECC/Xid "
                           "errors and run `tfgpu-install verify --burn 60`")
        return outcome("pass", f"SGEMM {m}x{n}x{k} through {os.path.basename(path)} matches the reference "
                       f"(max error {err:g})", measured)
    finally:
        for p in ptrs:
            cudart.cudaFree(p)
        lib.cublasDestroy_v2(handle)
