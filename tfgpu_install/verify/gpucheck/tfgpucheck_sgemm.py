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

_H2D, _D2H, _D2D = 1, 2, 3  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice


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
    """cuBLAS of the planned CUDA, else of the CUDA runtime the cuda-runtime layer loaded (same major)."""
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
        return outcome("skip", "needs the CUDA runtime (the cuda-runtime layer)")
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


class DeviceCompare:
    """Compare the product in C with a reference copy on the GPU itself (cuBLAS only, no kernels of
    our own): D = C; D -= C0 (cublasSaxpy); i = argmax |D| (cublasIsamax); copy back ONE float. The
    host never reads the n*n result, so the GPU is not left idle while Python compares."""

    def __init__(self, run: Sgemm) -> None:
        self.run = run
        self.bytes = ctypes.sizeof(run.host_c)
        self.ref = ctypes.c_void_p()
        self.diff = ctypes.c_void_p()

    def setup(self) -> Optional[dict[str, Any]]:
        for p in (self.ref, self.diff):
            rc = self.run.cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(self.bytes))
            if rc != 0:
                return self.run._rt_fail(rc, "cudaMalloc")
            self.run.ptrs.append(p)
        rc = self.run.cudart.cudaMemcpy(self.ref, self.run.ptrs[2], ctypes.c_size_t(self.bytes), _D2D)
        return self.run._rt_fail(rc, "cudaMemcpy on the GPU") if rc != 0 else None

    def max_error(self) -> tuple[Optional[float], Optional[dict[str, Any]]]:
        """(max |C - C0|, None) or (None, the failure)."""
        rt, blas, n2 = self.run.cudart, self.run.cublas, self.run.n * self.run.n
        rc = rt.cudaMemcpy(self.diff, self.run.ptrs[2], ctypes.c_size_t(self.bytes), _D2D)
        if rc != 0:
            return None, self.run._rt_fail(rc, "cudaMemcpy on the GPU")
        minus = ctypes.c_float(-1.0)
        rc = blas.cublasSaxpy_v2(self.run.handle, n2, ctypes.byref(minus), self.ref, 1, self.diff, 1)
        if rc != 0:
            return None, self.run._blas_fail(rc, "cublasSaxpy")
        where = ctypes.c_int(0)
        rc = blas.cublasIsamax_v2(self.run.handle, n2, self.diff, 1, ctypes.byref(where))
        if rc != 0:
            return None, self.run._blas_fail(rc, "cublasIsamax")
        one = ctypes.c_float(0.0)
        offset = ctypes.c_void_p((self.diff.value or 0) + 4 * max(where.value - 1, 0))
        rc = rt.cudaMemcpy(ctypes.byref(one), offset, ctypes.c_size_t(4), _D2H)
        if rc != 0:
            return None, self.run._rt_fail(rc, "cudaMemcpy from the GPU")
        return abs(one.value), None


class GpuClock:
    """GPU time between two events (cudaEventElapsedTime): how long the queued SGEMMs ran."""

    def __init__(self, cudart: Any) -> None:
        self.rt = cudart
        self.start, self.stop = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok = all(hasattr(cudart, f) for f in ("cudaEventCreate", "cudaEventRecord", "cudaEventSynchronize",
                                                   "cudaEventElapsedTime")) and \
            cudart.cudaEventCreate(ctypes.byref(self.start)) == 0 and \
            cudart.cudaEventCreate(ctypes.byref(self.stop)) == 0

    def mark(self, which: str) -> None:
        if self.ok:
            self.rt.cudaEventRecord(self.start if which == "start" else self.stop, None)

    def seconds(self) -> Optional[float]:
        if not self.ok or self.rt.cudaEventSynchronize(self.stop) != 0:
            return None
        ms = ctypes.c_float(0.0)
        return ms.value / 1000.0 if self.rt.cudaEventElapsedTime(ctypes.byref(ms), self.start, self.stop) == 0 else None

    def close(self) -> None:
        if self.ok and hasattr(self.rt, "cudaEventDestroy"):
            self.rt.cudaEventDestroy(self.start)
            self.rt.cudaEventDestroy(self.stop)


class BurnTally:
    iters = 0
    checks = 0
    mismatches = 0
    worst = 0.0
    gpu_seconds = 0.0
    timed = True


def _burn_batch(run: Sgemm, cmp: DeviceCompare, clock: GpuClock, batch: int,
                tally: BurnTally) -> Optional[dict[str, Any]]:
    """`batch` SGEMMs queued back to back between two events, then one on-device comparison."""
    clock.mark("start")
    for _ in range(batch):
        failure = run.multiply(fetch=False)
        if failure is not None:
            return failure
    clock.mark("stop")
    err_value, failure = cmp.max_error()  # waits for the batch
    if failure is not None or err_value is None:
        return failure or outcome("fail", "the on-device comparison gave no answer")
    spent = clock.seconds()
    if spent is None:
        tally.timed = False
    else:
        tally.gpu_seconds += spent
    tally.iters += batch
    tally.checks += 1
    tally.mismatches += int(err_value != 0.0)
    tally.worst = max(tally.worst, err_value)
    return None


def _burn_loop(run: Sgemm, seconds: float, tally: BurnTally) -> tuple[float, Optional[dict[str, Any]]]:
    """(wall seconds, failure): batches grow until each holds the GPU ~0.25 s, so the host's share
    (launch, one comparison, one float copied back) stays a sliver of the burn."""
    cmp = DeviceCompare(run)
    failure = cmp.setup()
    if failure is not None:
        return 0.0, failure
    clock = GpuClock(run.cudart)
    batch = 4
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            before = tally.gpu_seconds
            t0 = time.monotonic()
            failure = _burn_batch(run, cmp, clock, batch, tally)
            if failure is not None:
                return time.monotonic() - start, failure
            took = (tally.gpu_seconds - before) if tally.timed else time.monotonic() - t0
            if took < 0.25 and batch < 4096:
                batch *= 2
    finally:
        clock.close()
    return time.monotonic() - start, None


def sgemm_burn(state: dict[str, Any], seconds: float, size: int, telemetry: Any) -> dict[str, Any]:
    """SGEMMs for `seconds` on CUDA device 0, queued in batches that keep the GPU busy, the last
    product of each batch compared on the GPU with the first (a card that overheats or has bad memory
    starts computing wrong numbers), while `telemetry` samples it. Reports the duty cycle: the share
    of the burn the GPU spent inside SGEMM (gpu-burn holds it near 100%)."""
    cudart, cublas = state.get("cudart"), state.get("cublas")
    if cudart is None or cublas is None:
        return outcome("skip", "needs the cuda-runtime and cublas layers")
    run = Sgemm(cudart, cublas, size)
    tally = BurnTally()
    try:
        failure = run.setup() or run.multiply(fetch=False)
        if failure is not None:
            return failure
        with telemetry:
            elapsed, failure = _burn_loop(run, seconds, tally)
        if failure is not None:
            return failure
    finally:
        run.close()
    return _burn_outcome(tally, elapsed, size, telemetry.summary())


def _burn_outcome(tally: BurnTally, elapsed: float, size: int, tele: dict[str, Any]) -> dict[str, Any]:
    flop = tally.iters * 2.0 * size ** 3
    gpu_s = tally.gpu_seconds if tally.timed and tally.gpu_seconds > 0 else None
    burn = {"kind": "cublas-sgemm", "seconds": round(elapsed, 1), "n": size, "iterations": tally.iters,
            "checks": tally.checks, "mismatches": tally.mismatches, "max_abs_error": tally.worst,
            "compared": "on the GPU (cublasSaxpy + cublasIsamax against the first product)",
            "gflops": round(flop / max(elapsed, 1e-9) / 1e9, 1),
            "gpu_seconds": round(gpu_s, 3) if gpu_s else None,
            "gpu_gflops": round(flop / gpu_s / 1e9, 1) if gpu_s else None,
            "duty_cycle": round(gpu_s / elapsed, 4) if gpu_s and elapsed > 0 else None,
            "telemetry": tele, "throttled": [r for r in tele.get("throttle_reasons", []) if r != "sw_power_cap"]}
    measured = {"burn": burn}  # the key TensorFlow's burn uses: one report shape for both
    duty = f", GPU busy {burn['duty_cycle']:.0%}" if burn["duty_cycle"] is not None else ", GPU busy: unknown"
    summary = (f"SGEMM burn {burn['seconds']}s: {tally.iters} products of {size}, {tally.mismatches} wrong in "
               f"{tally.checks} checks, {burn['gpu_gflops'] or burn['gflops']} GFLOP/s{duty}")
    temp = tele.get("temp_c")
    if temp:
        summary += f", {temp['min']}-{temp['max']} C"
    if tally.mismatches:
        return outcome("fail", summary, measured, hint="the GPU computed wrong results under load: check "
                       "`nvidia-smi -q` for ECC/Xid errors, cooling and power")
    return outcome("pass", summary, measured)
