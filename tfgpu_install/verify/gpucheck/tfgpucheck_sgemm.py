"""Layer 4 of the GPU check (a cuBLAS SGEMM checked against a reference) and the SGEMM burn.

stdlib + ctypes only (numpy for the reference when the env has it): runs inside the target env
and, for `verify --host-only` and scripts/gpu-check.sh, with no TensorFlow at all.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_codes import CUBLAS_STATUS, CUDA_ERROR, HINTS, code_name, err, outcome
else:
    from tfgpucheck_codes import CUBLAS_STATUS, CUDA_ERROR, HINTS, code_name, err, outcome
if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_libs import CUBLAS, load_library, major, search_dirs, sonames
else:
    from tfgpucheck_libs import CUBLAS, load_library, major, search_dirs, sonames

_H2D, _D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost


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


class Sgemm:
    """C = A.B on the GPU through cuBLAS: buffers set up once, multiplied as often as asked."""

    def __init__(self, cudart: Any, cublas: Any, size: int) -> None:
        self.cudart, self.cublas, self.n = cudart, cublas, size
        self.handle = ctypes.c_void_p()
        self.ptrs: list[ctypes.c_void_p] = []
        self.a, self.b = _matrices(size, size, size)
        self.host_c = (ctypes.c_float * (size * size))()
        self.created = False

    def _rt_fail(self, rc: int, what: str) -> dict[str, Any]:
        name = code_name(CUDA_ERROR, rc, self.cudart, "cudaGetErrorName")
        return outcome("fail", f"{what} failed: {name} ({rc})", error=err(rc, name), hint=HINTS.get(name))

    def _blas_fail(self, rc: int, what: str) -> dict[str, Any]:
        name = code_name(CUBLAS_STATUS, rc, self.cublas, "cublasGetStatusName")
        return outcome("fail", f"{what} failed: {name} ({rc})", error=err(rc, name), hint=HINTS.get(name))

    def setup(self) -> Optional[dict[str, Any]]:
        """None, or the failure outcome."""
        rc = self.cublas.cublasCreate_v2(ctypes.byref(self.handle))
        if rc != 0:
            return self._blas_fail(rc, "cublasCreate")
        self.created = True
        n = self.n
        host = [(ctypes.c_float * (n * n))(*self.a), (ctypes.c_float * (n * n))(*self.b), self.host_c]
        for arr in host:
            p = ctypes.c_void_p()
            rc = self.cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(ctypes.sizeof(arr)))
            if rc != 0:
                return self._rt_fail(rc, "cudaMalloc")
            self.ptrs.append(p)
        for p, arr in zip(self.ptrs[:2], host[:2]):
            rc = self.cudart.cudaMemcpy(p, arr, ctypes.c_size_t(ctypes.sizeof(arr)), _H2D)
            if rc != 0:
                return self._rt_fail(rc, "cudaMemcpy to the GPU")
        return None

    def multiply(self, fetch: bool = True) -> Optional[dict[str, Any]]:
        """One SGEMM (and its result copied back when `fetch`): None, or the failure outcome."""
        n = self.n
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        rc = self.cublas.cublasSgemm_v2(self.handle, 0, 0, n, n, n, ctypes.byref(alpha), self.ptrs[0], n,
                                        self.ptrs[1], n, ctypes.byref(beta), self.ptrs[2], n)
        if rc != 0:
            return self._blas_fail(rc, "cublasSgemm")
        if fetch:
            rc = self.cudart.cudaMemcpy(self.host_c, self.ptrs[2], ctypes.c_size_t(ctypes.sizeof(self.host_c)), _D2H)
            if rc != 0:
                return self._rt_fail(rc, "cudaMemcpy from the GPU")
        return None

    def max_error(self, ref: list[float]) -> float:
        return float(max(abs(float(x) - y) for x, y in zip(self.host_c, ref)))

    def close(self) -> None:
        for p in self.ptrs:
            self.cudart.cudaFree(p)
        if self.created:
            self.cublas.cublasDestroy_v2(self.handle)


def load_cublas(plan: dict[str, Any], state: dict[str, Any]) -> tuple[Optional[Any], str, Optional[dict[str, Any]]]:
    """cuBLAS of the planned CUDA, else of the CUDA runtime layer 2 loaded (same major)."""
    runtime = state.get("runtime_version")
    want = major(plan.get("cuda")) or (int(runtime) // 1000 if runtime else None)
    names = sonames("libcublas.so", want, CUBLAS)
    lib, path, errors = load_library(names, search_dirs(plan, "cublas"))
    if lib is None:
        return None, "", outcome("fail", f"{names[0]} did not load: {errors[-1] if errors else 'not found'}",
                                 hint="re-run `tfgpu-install` to reinstall the nvidia-cublas wheel")
    return lib, path, None


def layer_cublas(plan: dict[str, Any], state: dict[str, Any], size: int = 64) -> dict[str, Any]:
    cudart = state.get("cudart")
    if cudart is None:
        return outcome("skip", "needs the CUDA runtime (layer 2)")
    lib, path, failure = load_cublas(plan, state)
    if failure is not None:
        return failure
    measured: dict[str, Any] = {"libcublas": path, "m": size, "n": size, "k": size}
    run = Sgemm(cudart, lib, size)
    try:
        failure = run.setup() or run.multiply()
        if failure is not None:
            failure["measured"] = measured
            return failure
        ref = reference_sgemm(run.a, run.b, size, size, size)
        max_err = run.max_error(ref)
        measured["max_abs_error"] = max_err
        if max_err > 1e-4 * max(1.0, max(abs(y) for y in ref)):
            return outcome("fail", f"SGEMM {size}x{size}x{size} on the GPU differs from the reference "
                           f"(max error {max_err:g})", measured, hint="the GPU computes wrong results: check "
                           "`nvidia-smi -q` for ECC/Xid errors and run `tfgpu-install verify --burn 60`")
        state["cublas"] = lib
        return outcome("pass", f"SGEMM {size}x{size}x{size} through {os.path.basename(path)} matches the "
                       f"reference (max error {max_err:g})", measured)
    finally:
        run.close()


def sgemm_burn(state: dict[str, Any], seconds: float, size: int, telemetry: Any) -> dict[str, Any]:
    """SGEMMs for `seconds` on CUDA device 0, every result compared with the first (a card that
    overheats or has bad memory starts computing wrong numbers), while `telemetry` samples it."""
    cudart, cublas = state.get("cudart"), state.get("cublas")
    if cudart is None or cublas is None:
        return outcome("skip", "needs layers 2 and 4 (CUDA runtime, cuBLAS)")
    run = Sgemm(cudart, cublas, size)
    iters = mismatches = 0
    try:
        failure = run.setup() or run.multiply()
        if failure is not None:
            return failure
        first = list(run.host_c)
        with telemetry:
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                for _ in range(7):  # queue work between the checks: the GPU stays busy
                    failure = run.multiply(fetch=False)
                    if failure is not None:
                        return failure
                failure = run.multiply()
                if failure is not None:
                    return failure
                iters += 8
                mismatches += int(run.max_error(first) != 0.0)
            elapsed = time.monotonic() - start
    finally:
        run.close()
    tele = telemetry.summary()
    burn = {"kind": "cublas-sgemm", "seconds": round(elapsed, 1), "n": size, "iterations": iters,
            "mismatches": mismatches, "gflops": round(iters * 2.0 * size ** 3 / max(elapsed, 1e-9) / 1e9, 1),
            "telemetry": tele, "throttled": [r for r in tele.get("throttle_reasons", []) if r != "sw_power_cap"]}
    measured = {"burn": burn}  # the key TensorFlow's burn uses: one report shape for both
    summary = (f"SGEMM burn {burn['seconds']}s: {iters} products of {size}, {mismatches} wrong, "
               f"{burn['gflops']} GFLOP/s")
    temp = tele.get("temp_c")
    if temp:
        summary += f", {temp['min']}-{temp['max']} C"
    if mismatches:
        return outcome("fail", summary, measured, hint="the GPU computed wrong results under load: check "
                       "`nvidia-smi -q` for ECC/Xid errors, cooling and power")
    return outcome("pass", summary, measured)
