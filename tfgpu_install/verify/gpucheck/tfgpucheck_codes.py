"""Status codes of the CUDA driver, runtime, cuBLAS and cuDNN, by name, and how to read them from
the libraries themselves (stdlib + ctypes only: runs inside the target env, imported by name).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the sibling as mypy sees it; at run time it is imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import ErrorCode, Measured, Outcome

# Real codes, reported by name, never as bare numbers. CUresult: cuda.h `enum cudaError_enum`
# (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html: 304 OPERATING_SYSTEM,
# 800 NOT_PERMITTED, 801 NOT_SUPPORTED ...); cudaError_t: driver_types.h `enum cudaError`
# (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html); cublasStatus_t: cublas_api.h.
CU_RESULT = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED",
    802: "CUDA_ERROR_SYSTEM_NOT_READY", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}
CUDA_ERROR = {
    0: "cudaSuccess", 1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation",
    3: "cudaErrorInitializationError", 4: "cudaErrorCudartUnloading", 34: "cudaErrorStubLibrary",
    35: "cudaErrorInsufficientDriver", 36: "cudaErrorCallRequiresNewerDriver",
    46: "cudaErrorDevicesUnavailable", 100: "cudaErrorNoDevice", 101: "cudaErrorInvalidDevice",
    209: "cudaErrorNoKernelImageForDevice", 218: "cudaErrorInvalidPtx", 222: "cudaErrorUnsupportedPtxVersion",
    304: "cudaErrorOperatingSystem", 800: "cudaErrorNotPermitted", 801: "cudaErrorNotSupported",
    802: "cudaErrorSystemNotReady", 803: "cudaErrorSystemDriverMismatch",
    804: "cudaErrorCompatNotSupportedOnDevice", 999: "cudaErrorUnknown",
}
CUBLAS_STATUS = {
    0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}
# cudnnStatus_t: cuDNN 9 numbers statuses in families (cudnn_graph.h: 1000 not initialised, 2000 bad
# parameter, 3000 not supported, 4000 internal error, 5000 execution failed); cuDNN 8 counts 1, 2, 3...
CUDNN_STATUS = {
    0: "CUDNN_STATUS_SUCCESS", 1001: "CUDNN_STATUS_NOT_INITIALIZED", 1002: "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
    1008: "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED", 2000: "CUDNN_STATUS_BAD_PARAM", 3000: "CUDNN_STATUS_NOT_SUPPORTED",
    3007: "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH", 3008: "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING",
    3009: "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE", 4001: "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED",
    4000: "CUDNN_STATUS_INTERNAL_ERROR", 5000: "CUDNN_STATUS_EXECUTION_FAILED",
    5003: "CUDNN_STATUS_EXECUTION_FAILED_CUDART",
}
CUDNN8_STATUS = {0: "CUDNN_STATUS_SUCCESS", 1: "CUDNN_STATUS_NOT_INITIALIZED", 2: "CUDNN_STATUS_ALLOC_FAILED",
                 3: "CUDNN_STATUS_BAD_PARAM", 4: "CUDNN_STATUS_INTERNAL_ERROR", 6: "CUDNN_STATUS_ARCH_MISMATCH",
                 8: "CUDNN_STATUS_EXECUTION_FAILED", 9: "CUDNN_STATUS_NOT_SUPPORTED",
                 11: "CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING"}
# CU_DEVICE_ATTRIBUTE_COMPUTE_MODE values (cuda.h CUcomputemode)
COMPUTE_MODES = {0: "default", 2: "prohibited", 3: "exclusive-process"}
_BUSY = ("the GPU is in exclusive-process compute mode and another process holds it (or the mode is "
         "prohibited): see `nvidia-smi -q -d COMPUTE` and `nvidia-smi --query-compute-apps=pid,name --format=csv`; "
         "stop that process or set the default mode with `nvidia-smi -c DEFAULT`")
_COMPAT = ("a forward-compatibility libcuda (the cuda-compat package, e.g. /usr/local/cuda/compat, or a "
           "container's compat layer) is loaded, and this GPU or driver branch does not support forward compatibility "
           "(only data-centre GPUs on supported branches do): remove the compat directory from LD_LIBRARY_PATH / "
           "ld.so.conf so the driver's own libcuda is used, or upgrade the driver to one that runs this CUDA")
_PTX_NEWER = ("the code's PTX was made by a newer CUDA toolkit than this driver can compile: upgrade the NVIDIA "
              "driver, or use a build (CUDA wheels, TensorFlow release) made for the CUDA this driver supports")
_NO_BINARY = ("this library or build has no kernels for this GPU's compute capability (no SASS for it and no PTX the "
              "driver can compile): use a release built for this GPU (`tfgpu-install plan` says which), or for an old "
              "GPU one that still carries it")
_BAD_PTX = ("the driver could not compile the code's PTX for this GPU: on a Blackwell GPU (compute capability 10.x or "
            "12.x) TensorFlow <= 2.21's wheels carry no kernels for it and their PTX fails to compile (public reports: "
            "tensorflow#101746, tensorflow#111958); run a release whose build carries this architecture, NVIDIA's "
            "container where it serves it, or a source build")
HINTS = {
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": _COMPAT,
    "cudaErrorCompatNotSupportedOnDevice": _COMPAT,
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": _PTX_NEWER,
    "cudaErrorUnsupportedPtxVersion": _PTX_NEWER,
    "CUDA_ERROR_NO_BINARY_FOR_GPU": _NO_BINARY,
    "cudaErrorNoKernelImageForDevice": _NO_BINARY,
    "CUDA_ERROR_INVALID_PTX": _BAD_PTX,
    "cudaErrorInvalidPtx": _BAD_PTX,
    "CUDA_ERROR_DEVICE_UNAVAILABLE": _BUSY,
    "cudaErrorDevicesUnavailable": _BUSY,
    "cudaErrorCallRequiresNewerDriver": "this CUDA runtime needs a newer driver for this call: upgrade the NVIDIA "
    "driver, or re-run `tfgpu-install` so it picks a CUDA this driver supports",
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
    "CUDA_ERROR_OPERATING_SYSTEM": "an OS call inside the driver failed: check `dmesg` and the /dev/nvidia* "
    "permissions (in a container: the device cgroup)",
    "CUDA_ERROR_NOT_PERMITTED": "the driver refused the operation: check the GPU's compute mode "
    "(`nvidia-smi -q -d COMPUTE`) and whether another process holds an exclusive GPU",
    "CUDA_ERROR_NOT_SUPPORTED": "the GPU or driver does not support this operation: check `nvidia-smi` and the "
    "driver version",
}


# Namers that return the name as `const char *` (an unknown code gives a placeholder string).
# cudnnGetErrorString's is "CUDNN_UNKNOWN_STATUS" (cuDNN 8 and 9).
_UNRECOGNISED = ("unrecognized error code", "CUBLAS_STATUS_UNKNOWN", "CUDNN_UNKNOWN_STATUS")


def code_name(table: dict[int, str], code: int, lib: Any = None, namer: str = "") -> str:
    """The code's name: from the library itself when it exports a namer, else the table.

    cuGetErrorName (cuda.h) is `CUresult cuGetErrorName(CUresult error, const char **pStr)`: it
    returns a status and writes the name through the out-parameter (NULL and
    CUDA_ERROR_INVALID_VALUE for a code it does not know). cudaGetErrorName, cublasGetStatusName
    and cudnnGetErrorString return `const char *`.
    """
    fn = getattr(lib, namer, None) if lib is not None and namer else None
    if fn is not None:
        try:
            if namer == "cuGetErrorName":
                fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
                fn.restype = ctypes.c_int
                out = ctypes.c_char_p()
                if fn(code, ctypes.byref(out)) == 0 and out.value:
                    return out.value.decode(errors="replace")
            else:
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_char_p
                name = fn(code)
                text = name.decode(errors="replace") if isinstance(name, bytes) else ""
                if text and text not in _UNRECOGNISED:
                    return text
        except (ctypes.ArgumentError, OSError, UnicodeError, ValueError):  # a misbehaving namer: the table answers
            pass
    return table.get(code, f"unknown error {code}")


def outcome(status: str, summary: str, measured: Optional[Measured] = None, *,
            error: Optional[ErrorCode] = None, hint: Optional[str] = None) -> Outcome:
    return {"status": status, "summary": summary, "measured": measured or {}, "error": error, "hint": hint}


def err(code: int, name: str) -> ErrorCode:
    return {"code": code, "name": name}
