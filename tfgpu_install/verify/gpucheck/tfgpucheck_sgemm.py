"""Layer 4 of the GPU check (a cuBLAS SGEMM checked against a reference) and the SGEMM burn.

stdlib + ctypes only (numpy for the reference when the env has it): runs inside the target env
and, for `verify --host-only` and scripts/gpu-check.sh, with no TensorFlow at all.
"""

from __future__ import annotations

import ctypes
import os
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_codes import CUBLAS_STATUS, CUDA_ERROR, HINTS, code_name, err, outcome
else:
    from tfgpucheck_codes import CUBLAS_STATUS, CUDA_ERROR, HINTS, code_name, err, outcome
if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck import tfgpucheck_health as judge
    from tfgpu_install.verify.gpucheck.tfgpucheck_libs import CUBLAS, load_library, major, search_dirs, sonames
    from tfgpu_install.verify.gpucheck.tfgpucheck_nvml import Telemetry
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        Burn,
        BurnPlan,
        CheckPlan,
        DeviceEntry,
        Health,
        HostCheck,
        HostMismatch,
        Measured,
        Outcome,
        State,
        WrongProduct,
    )
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        Telemetry as TelemetrySummary,
    )
else:
    import tfgpucheck_health as judge
    from tfgpucheck_libs import CUBLAS, load_library, major, search_dirs, sonames
    from tfgpucheck_report import DeviceEntry, Health

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

    def _rt_fail(self, rc: int, what: str) -> Outcome:
        name = code_name(CUDA_ERROR, rc, self.cudart, "cudaGetErrorName")
        return outcome("fail", f"{what} failed: {name} ({rc})", error=err(rc, name), hint=HINTS.get(name))

    def _blas_fail(self, rc: int, what: str) -> Outcome:
        name = code_name(CUBLAS_STATUS, rc, self.cublas, "cublasGetStatusName")
        return outcome("fail", f"{what} failed: {name} ({rc})", error=err(rc, name), hint=HINTS.get(name))

    def setup(self) -> Optional[Outcome]:
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

    def multiply(self, fetch: bool = True) -> Optional[Outcome]:
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


def load_cublas(plan: CheckPlan, state: State) -> tuple[Optional[Any], str, Optional[Outcome]]:
    """cuBLAS of the planned CUDA, else of the CUDA runtime the cuda-runtime layer loaded (same major)."""
    runtime = state.get("runtime_version")
    want = major(plan.get("cuda")) or (int(runtime) // 1000 if runtime else None)
    names = sonames("libcublas.so", want, CUBLAS)
    lib, path, errors = load_library(names, search_dirs(plan, "cublas"))
    if lib is None:
        return None, "", outcome("fail", f"{names[0]} did not load: {errors[-1] if errors else 'not found'}",
                                 hint="re-run `tfgpu-install` to reinstall the nvidia-cublas wheel")
    return lib, path, None


def _sgemm_on(cudart: Any, lib: Any, dev: int, size: int,
              select: bool) -> tuple[DeviceEntry, Optional[Outcome]]:
    """One SGEMM on CUDA device `dev` (made current when `select`: with one GPU it already is, and
    cublasCreate names a missing driver in its own words), compared with the host: (measured, failure)."""
    measured: DeviceEntry = {"device": dev}
    rc = cudart.cudaSetDevice(dev) if select else 0
    if rc != 0:
        name = code_name(CUDA_ERROR, rc, cudart, "cudaGetErrorName")
        return measured, outcome("fail", f"cudaSetDevice({dev}) failed: {name} ({rc})", error=err(rc, name))
    run = Sgemm(cudart, lib, size)
    try:
        failure = run.setup() or run.multiply()
        if failure is not None:
            return measured, failure
        ref = reference_sgemm(run.a, run.b, size, size, size)
        measured["max_abs_error"] = max_err = run.max_error(ref)
        if max_err > 1e-4 * max(1.0, max(abs(y) for y in ref)):
            return measured, outcome("fail", f"SGEMM {size}x{size}x{size} on GPU {dev} differs from the reference "
                                     f"(max error {max_err:g})", hint="the GPU computes wrong results: check "
                                     "`nvidia-smi -q` for ECC/Xid errors and run `tfgpu-install verify --burn`")
        return measured, None
    finally:
        run.close()


def layer_cublas(plan: CheckPlan, state: State, size: int = 64) -> Outcome:
    """An SGEMM compared with the host on every visible GPU (one after another)."""
    cudart = state.get("cudart")
    if cudart is None:
        return outcome("skip", "needs the CUDA runtime (the cuda-runtime layer)")
    lib, path, failure = load_cublas(plan, state)
    if failure is not None:
        return failure
    done: list[DeviceEntry] = []
    measured: Measured = {"libcublas": path, "m": size, "n": size, "k": size, "devices": done}
    indices = [d["index"] for d in state.get("devices") or [] if isinstance(d.get("index"), int)] or [0]
    for dev in indices:
        one, failure = _sgemm_on(cudart, lib, dev, size, select=len(indices) > 1)
        done.append({**one, "status": "fail" if failure else "pass"})
        if failure is not None:
            if "max_abs_error" in one:
                measured["max_abs_error"] = one["max_abs_error"]
            failure["measured"] = measured
            if len(indices) > 1 and not failure["summary"].startswith(f"SGEMM {size}"):
                failure["summary"] = f"GPU {dev}: {failure['summary']}"
            return failure
    if len(indices) > 1:
        cudart.cudaSetDevice(indices[0])
    measured["max_abs_error"] = max(d["max_abs_error"] for d in done)
    state["cublas"] = lib
    where = f" on {len(indices)} GPUs" if len(indices) > 1 else ""
    return outcome("pass", f"SGEMM {size}x{size}x{size} through {os.path.basename(path)} matches the "
                   f"reference{where} (max error {measured['max_abs_error']:g})", measured)


class DeviceCompare:
    """Compare the product in C with a reference copy on the GPU itself (cuBLAS only, no kernels of
    our own): D = C; D -= C0 (cublasSaxpy); i = argmax |D| (cublasIsamax); copy back ONE float. The
    host never reads the n*n result, so the GPU is not left idle while Python compares."""

    def __init__(self, run: Sgemm) -> None:
        self.run = run
        self.bytes = ctypes.sizeof(run.host_c)
        self.ref = ctypes.c_void_p()
        self.diff = ctypes.c_void_p()

    def setup(self) -> Optional[Outcome]:
        for p in (self.ref, self.diff):
            rc = self.run.cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(self.bytes))
            if rc != 0:
                return self.run._rt_fail(rc, "cudaMalloc")
            self.run.ptrs.append(p)
        rc = self.run.cudart.cudaMemcpy(self.ref, self.run.ptrs[2], ctypes.c_size_t(self.bytes), _D2D)
        return self.run._rt_fail(rc, "cudaMemcpy on the GPU") if rc != 0 else None

    def max_error(self) -> tuple[Optional[float], Optional[Outcome]]:
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
    """GPU time between two events (cudaEventElapsedTime): how long the queued work ran."""

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


# ---- the burn -------------------------------------------------------------------------------------
# Exact but varied operands: each float32 is +-(1 + m/8) * 2^e with m in 0..7 and e in {0, 1}, drawn at
# random, so every value is a multiple of 1/8 below 4. A product of two is a multiple of 1/64 below 16,
# and every partial sum of n <= 16384 of them is a multiple of 1/64 below 2^18: exactly representable
# in float32 (and the inputs in TF32). Any summation order, any algorithm, gives the same bits.
# The bytes are made without a Python loop: one random byte per element, mapped through two
# 256-entry tables to the float's two high bytes (the low two are zero).
MAX_EXACT_N = 16384
_HIGH = bytes(((r >> 1 & 1) << 7) | (0x40 if r & 1 else 0x3F) for r in range(256))  # sign, exponent 128 / 127
_MID = bytes((0x00 if r & 1 else 0x80) | (((r >> 2) & 7) << 4) for r in range(256))  # exponent's low bit, m
EIGHTHS = [(-1 if r >> 1 & 1 else 1) * (8 + ((r >> 2) & 7)) * (2 if r & 1 else 1) for r in range(256)]  # value * 8


class Operand:
    """An n x n column-major float32 matrix of exact values (above), and the random bytes that chose them."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.choice = random.Random(seed).randbytes(n * n)
        self.data = bytearray(4 * n * n)
        self.data[3::4] = self.choice.translate(_HIGH)
        self.data[2::4] = self.choice.translate(_MID)

    def eighths(self, start: int, step: int) -> list[int]:
        """n values (times 8) from element `start` on, every `step`: a row (step n) or a column (step 1)."""
        return [EIGHTHS[b] for b in self.choice[start:start + step * self.n:step]]


def exact_entry(a: Operand, b: Operand, i: int, j: int) -> float:
    """C[i, j] of C = A.B, computed exactly on the host (integers in 64ths)."""
    row, col = a.eighths(i, a.n), b.eighths(j * b.n, 1)
    return sum(x * y for x, y in zip(row, col)) / 64.0


def burn_plan(free_bytes: int, l2_bytes: Optional[int], n: int = 0, share: float = 0.8) -> BurnPlan:
    """The burn's size on a GPU with `free_bytes` free: n x n products (8192 unless asked, halved until A,
    B and two products fit) into as many distinct output buffers as `share` of the free memory holds,
    as gpu-burn sizes its run (it takes 90%): far past the L2 cache, so the products stream through
    the GPU's memory. The buffers a pass really uses are capped later by time (`passes_within`)."""
    n = min(n or 8192, MAX_EXACT_N)
    while n > 256 and 4 * 4 * n * n > share * free_bytes:
        n //= 2
    per = 4 * n * n
    buffers = max(int(share * free_bytes) // per - 2, 1)
    return {"n": n, "buffers": buffers, "bytes_per_product": per, "free_bytes": free_bytes, "l2_bytes": l2_bytes,
            "share_of_free": share}


def passes_within(plan: BurnPlan, seconds_per_product: float, pass_seconds: float = 3.0) -> int:
    """The buffers one pass over the outputs uses: as many as the memory plan allows, and no more than
    `pass_seconds` of products (the burn ends on a checked pass: this bounds its overshoot); >= 2."""
    by_time = int(pass_seconds / max(seconds_per_product, 1e-6))
    return max(2, min(int(plan["buffers"]), by_time))


class DeviceBurn:
    """One GPU's burn: C_b = A.B - C_b into every output buffer b, pass after pass. A buffer alternates
    between the product R (written from zeros) and 0 (R subtracted from a fresh product): each 0-pass is
    summed on the GPU (cublasSasum, pointer mode device: no host sync per product), and a non-zero sum
    means a wrong element in that product or in the one before it. Every product is checked, on the GPU;
    one product is also checked against the host (`exact_entry`) at sampled entries."""

    def __init__(self, cudart: Any, cublas: Any, device: int, a: Operand, b: Operand) -> None:
        self.rt, self.blas, self.dev, self.a, self.b = cudart, cublas, device, a, b
        self.n = a.n
        self.handle = ctypes.c_void_p()
        self.ptrs: dict[str, ctypes.c_void_p] = {}
        self.buffers = 0
        self.created = False
        self.ranges: list[tuple[int, int]] = []  # the buffer ranges summed since the last check

    def _rt(self, rc: int, what: str) -> Outcome:
        name = code_name(CUDA_ERROR, rc, self.rt, "cudaGetErrorName")
        return outcome("fail", f"GPU {self.dev}: {what} failed: {name} ({rc})", error=err(rc, name),
                       hint=HINTS.get(name))

    def _blas(self, rc: int, what: str) -> Outcome:
        name = code_name(CUBLAS_STATUS, rc, self.blas, "cublasGetStatusName")
        return outcome("fail", f"GPU {self.dev}: {what} failed: {name} ({rc})", error=err(rc, name),
                       hint=HINTS.get(name))

    def _alloc(self, key: str, size: int) -> Optional[Outcome]:
        p = ctypes.c_void_p()
        rc = self.rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
        if rc != 0:
            return self._rt(rc, f"cudaMalloc of {size >> 20} MiB ({key})")
        self.ptrs[key] = p
        return None

    def setup(self, buffers: int) -> Optional[Outcome]:
        """Handle (pointer mode device), A and B uploaded, `buffers` zeroed outputs, the scalars."""
        rc = self.rt.cudaSetDevice(self.dev)
        if rc != 0:
            return self._rt(rc, f"cudaSetDevice({self.dev})")
        rc = self.blas.cublasCreate_v2(ctypes.byref(self.handle))
        if rc != 0:
            return self._blas(rc, "cublasCreate")
        self.created = True
        per = 4 * self.n * self.n
        for key, size in (("a", per), ("b", per), ("c", per * buffers), ("sums", 4 * buffers), ("scalars", 8),
                          ("where", 4)):
            failure = self._alloc(key, size)
            if failure is not None:
                return failure
        self.buffers = buffers
        scalars = (ctypes.c_float * 2)(1.0, -1.0)
        for key, host, size in (("a", self.a.data, per), ("b", self.b.data, per), ("scalars", scalars, 8)):
            src = (ctypes.c_char * size).from_buffer(host)
            rc = self.rt.cudaMemcpy(self.ptrs[key], src, ctypes.c_size_t(size), _H2D)
            if rc != 0:
                return self._rt(rc, "cudaMemcpy to the GPU")
        rc = self.rt.cudaMemset(self.ptrs["c"], 0, ctypes.c_size_t(per * buffers))
        if rc != 0:
            return self._rt(rc, "cudaMemset")
        rc = self.blas.cublasSetPointerMode_v2(self.handle, 1)  # CUBLAS_POINTER_MODE_DEVICE
        return self._blas(rc, "cublasSetPointerMode") if rc != 0 else None

    def _at(self, key: str, offset_bytes: int) -> ctypes.c_void_p:
        return ctypes.c_void_p((self.ptrs[key].value or 0) + offset_bytes)

    def products(self, first: int, count: int, check: bool) -> Optional[Outcome]:
        """C_b = A.B - C_b for b in [first, first+count) in one strided-batched call (A and B with stride
        0), then, on a checking pass, the sum of |elements| of those products into sums[first] on the GPU:
        one cublasSasum over the contiguous buffers (in pieces of < 2^31 elements); a non-zero sum is
        looked into buffer by buffer (`check_ranges`)."""
        n, per = self.n, 4 * self.n * self.n
        one, minus = self._at("scalars", 0), self._at("scalars", 4)
        rc = self.blas.cublasSgemmStridedBatched(
            self.handle, 0, 0, n, n, n, one, self.ptrs["a"], n, ctypes.c_longlong(0), self.ptrs["b"], n,
            ctypes.c_longlong(0), minus, self._at("c", per * first), n, ctypes.c_longlong(n * n), count)
        if rc != 0:
            return self._blas(rc, "cublasSgemmStridedBatched")
        if check:
            step = max(1, (2**31 - 1) // (n * n))
            for s in range(first, first + count, step):
                e = min(s + step, first + count)
                failure = self._sasum(s, e)
                if failure is not None:
                    return failure
                self.ranges.append((s, e))
        return None

    def _sasum(self, s: int, e: int) -> Optional[Outcome]:
        """sums[s] = sum |C_b| over buffers s..e-1 (contiguous), on the GPU."""
        per = 4 * self.n * self.n
        rc = self.blas.cublasSasum_v2(self.handle, self.n * self.n * (e - s), self._at("c", per * s), 1,
                                      self._at("sums", 4 * s))
        return self._blas(rc, "cublasSasum") if rc != 0 else None

    def check_ranges(self, upto: int) -> tuple[list[tuple[int, float]], Optional[Outcome]]:
        """[(buffer, sum |C_b|)] for every wrong product of the ranges summed since the last check."""
        sums, failure = self.sums(upto)
        ranges, self.ranges = self.ranges, []
        if failure is not None or sums is None:
            return [], failure
        wrong: list[tuple[int, float]] = []
        for s, e in ranges:
            if sums[s] == 0.0:  # NaN != 0 too
                continue
            for b in range(s, e):  # rare: which of them
                failure = self._sasum(b, b + 1)
                if failure is not None:
                    return wrong, failure
            again, failure = self.sums(upto)
            if failure is not None or again is None:
                return wrong, failure
            wrong += [(b, again[b]) for b in range(s, e) if again[b] != 0.0]
        return wrong, None

    def sums(self, count: int) -> tuple[Optional[list[float]], Optional[Outcome]]:
        out = (ctypes.c_float * count)()
        rc = self.rt.cudaMemcpy(out, self.ptrs["sums"], ctypes.c_size_t(4 * count), _D2H)
        return (None, self._rt(rc, "cudaMemcpy from the GPU")) if rc != 0 else ([float(x) for x in out], None)

    def worst(self, b: int) -> WrongProduct:
        """Where a wrong product's largest difference is (cublasIsamax on the buffer that should be 0)."""
        n, per = self.n, 4 * self.n * self.n
        where, value = ctypes.c_int(0), ctypes.c_float(0.0)
        if self.blas.cublasIsamax_v2(self.handle, n * n, self._at("c", per * b), 1, self.ptrs["where"]) != 0 or \
                self.rt.cudaMemcpy(ctypes.byref(where), self.ptrs["where"], ctypes.c_size_t(4), _D2H) != 0:
            return {}
        idx = max(where.value - 1, 0)
        if self.rt.cudaMemcpy(ctypes.byref(value), self._at("c", per * b + 4 * idx), ctypes.c_size_t(4), _D2H) != 0:
            return {}
        return {"row": idx % n, "column": idx // n, "difference": abs(value.value)}

    def reset(self, b: int) -> Optional[Outcome]:
        """A buffer that held a wrong difference starts again from zeros (so one fault is counted once)."""
        per = 4 * self.n * self.n
        rc = self.rt.cudaMemset(self._at("c", per * b), 0, ctypes.c_size_t(per))
        return self._rt(rc, "cudaMemset") if rc != 0 else None

    def host_check(self, rows: int = 8, columns: int = 16) -> HostCheck:
        """Buffer 0 holds R = A.B after the first pass: compare rows x columns entries of it, spread over
        the whole matrix, with the exact host value (a few rows and columns: each is one slice)."""
        n = self.n
        picked_rows = sorted({0, n - 1} | {(k * 7919 + 3) % n for k in range(rows - 2)})  # the corners too
        picked_cols = sorted({0, n - 1} | {(k * 104729 + 5) % n for k in range(columns - 2)})
        row_vals = {i: self.a.eighths(i, n) for i in picked_rows}
        col_vals = {j: self.b.eighths(j * n, 1) for j in picked_cols}
        bad: list[HostMismatch] = []
        for i in picked_rows:
            for j in picked_cols:
                got = ctypes.c_float(0.0)
                rc = self.rt.cudaMemcpy(ctypes.byref(got), self._at("c", 4 * (j * n + i)), ctypes.c_size_t(4), _D2H)
                want = sum(x * y for x, y in zip(row_vals[i], col_vals[j])) / 64.0
                if rc != 0 or got.value != want:
                    bad.append({"row": i, "column": j, "gpu": got.value if rc == 0 else None, "host": want})
        return {"entries": len(picked_rows) * len(picked_cols), "mismatches": len(bad), "first": bad[:3]}

    def close(self) -> None:
        self.rt.cudaSetDevice(self.dev)
        for p in self.ptrs.values():
            self.rt.cudaFree(p)
        if self.created:
            self.blas.cublasDestroy_v2(self.handle)


class BurnTally:
    def __init__(self) -> None:
        self.products = 0
        self.checks = 0
        self.mismatches = 0
        self.wrong: list[WrongProduct] = []
        self.gpu_seconds = 0.0
        self.timed = True
        self.series: list[list[float]] = []  # [t, GFLOP/s] per timed chunk (t on time.monotonic)
        self.passes = 0
        self.host: HostCheck = {}
        self.start = 0.0
        self.end = 0.0


def _launch(run: DeviceBurn, clock: GpuClock, first: int, count: int, check: bool) -> Optional[Outcome]:
    """Queue one strided-batched call of `count` products (and their sums) between two events."""
    clock.mark("start")
    failure = run.products(first, count, check)
    if failure is None:
        clock.mark("stop")
    return failure


def _finish(run: DeviceBurn, clock: GpuClock, count: int, launched: float, tally: BurnTally) -> float:
    """Wait for a queued chunk and count it: its GPU seconds (events; wall time without them)."""
    spent = clock.seconds()  # waits for the chunk
    if spent is None:
        tally.timed = False
        spent = time.monotonic() - launched
    tally.gpu_seconds += spent
    tally.products += count
    tally.series.append([round(time.monotonic(), 3), round(count * 2.0 * run.n ** 3 / max(spent, 1e-9) / 1e9, 1)])
    return spent


def _chunk(run: DeviceBurn, clock: GpuClock, first: int, count: int, check: bool,
           tally: BurnTally) -> tuple[float, Optional[Outcome]]:
    """One chunk, queued and waited for: (seconds, failure)."""
    t0 = time.monotonic()
    failure = _launch(run, clock, first, count, check)
    if failure is not None:
        return 0.0, failure
    return _finish(run, clock, count, t0, tally), None


def _check_pass(run: DeviceBurn, upto: int, tally: BurnTally) -> Optional[Outcome]:
    """After a 0-pass: every buffer's sum must be exactly 0."""
    wrong, failure = run.check_ranges(upto)
    if failure is not None:
        return failure
    tally.checks += upto
    for b, total in wrong:
        tally.mismatches += 1
        if len(tally.wrong) < 10:
            tally.wrong.append({**run.worst(b), "buffer": b, "sum_abs": total, "pass_no": tally.passes,
                                "t": round(time.monotonic(), 3)})
        failure = run.reset(b)
        if failure is not None:
            return failure
    return None


def _burn_loop(run: DeviceBurn, seconds: float, tally: BurnTally, stop: threading.Event,
               per_product: float = 0.0) -> Optional[Outcome]:
    """Passes until `seconds` are over (or `stop` is set), always ending on a checked pass. The next chunk
    is queued before the host waits for the one before it, so the GPU has work while the host is late
    (a loaded host, a descheduled thread); chunks are sized from the probe (~0.5 s of GPU work each), so
    the host's share (one call, one sum per chunk, one event wait) stays a sliver of the burn."""
    clocks = (GpuClock(run.rt), GpuClock(run.rt))
    chunk = max(1, min(4096, int(0.5 / per_product))) if per_product > 0 else 1
    tally.start = time.monotonic()
    upto = run.buffers
    k = 0
    try:
        while True:
            check = tally.passes % 2 == 1  # even passes write R from zeros, odd ones must give 0
            b = 0
            pending: Optional[tuple[GpuClock, int, float]] = None
            while b < upto:
                m = min(chunk, upto - b)
                clock = clocks[k % 2]
                k += 1
                launched = time.monotonic()
                failure = _launch(run, clock, b, m, check)
                if failure is not None:
                    return failure
                b += m
                if pending is not None:  # the one before: waited for while this one is queued
                    if _finish(run, *pending, tally) < 0.5 and chunk < 4096:
                        chunk *= 2
                pending = (clock, m, launched)
                over = time.monotonic() - tally.start >= seconds or stop.is_set()
                if over and not check:
                    upto = b  # stop writing: check what was written
                    break
            if pending is not None:
                _finish(run, *pending, tally)
            if check:
                failure = _check_pass(run, upto, tally)
                if failure is not None:
                    return failure
            elif tally.passes == 0:
                tally.host = run.host_check()
            tally.passes += 1
            if check and (time.monotonic() - tally.start >= seconds or stop.is_set()):
                return None
    finally:
        tally.end = time.monotonic()
        for c in clocks:
            c.close()


def _sized(cudart: Any, dev: int, size: int, share: float) -> BurnPlan:
    """burn_plan from the device's own free memory and L2 size."""
    free, total, l2 = ctypes.c_size_t(0), ctypes.c_size_t(0), ctypes.c_int(0)
    cudart.cudaSetDevice(dev)
    got = cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
    has_l2 = hasattr(cudart, "cudaDeviceGetAttribute") and cudart.cudaDeviceGetAttribute(ctypes.byref(l2), 89, dev) == 0
    plan = burn_plan(free.value if got else 1 << 30, l2.value if has_l2 else None, size, share)
    plan["free_known"] = got
    return plan


def _probe_product(cudart: Any, cublas: Any, dev: int, a: Operand,
                   b: Operand) -> tuple[float, Optional[Outcome]]:
    """Seconds of one product on this GPU (warm-up included, then timed), to size a pass."""
    run = DeviceBurn(cudart, cublas, dev, a, b)
    try:
        failure = run.setup(1)
        if failure is not None:
            return 0.0, failure
        clock = GpuClock(cudart)
        try:
            tally = BurnTally()
            for _ in range(2):
                spent, failure = _chunk(run, clock, 0, 1, False, tally)
                if failure is not None:
                    return 0.0, failure
        finally:
            clock.close()
        return spent, None
    finally:
        run.close()


class GpuBurn(threading.Thread):
    """One GPU's burn in a thread of its own (ctypes releases the GIL during each call), so every GPU
    is under load at once, as a training job loads them."""

    def __init__(self, cudart: Any, cublas: Any, device: DeviceEntry, a: Operand, b: Operand, seconds: float,
                 plan: BurnPlan, pass_seconds: float, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.args = (cudart, cublas, device, a, b, seconds, plan, pass_seconds)
        self.stop_all = stop
        self.tally = BurnTally()
        self.failure: Optional[Outcome] = None
        self.buffers = 0

    def run(self) -> None:
        cudart, cublas, device, a, b, seconds, plan, pass_seconds = self.args
        try:
            per_product, failure = _probe_product(cudart, cublas, device["index"], a, b)
            if failure is None:
                self.buffers = passes_within(plan, per_product, pass_seconds)
                run = DeviceBurn(cudart, cublas, device["index"], a, b)
                try:
                    failure = run.setup(self.buffers) or _burn_loop(run, seconds, self.tally, self.stop_all,
                                                                    per_product)
                finally:
                    run.close()
            self.failure = failure
        except Exception as exc:  # noqa: BLE001  (a misbehaving library: recorded, the other GPUs go on)
            self.failure = outcome("fail", f"GPU {device['index']}: burn error {type(exc).__name__}: {exc}")
        if self.failure is not None:
            self.stop_all.set()  # one GPU failed: the others end their pass and report


def sgemm_burn(state: State, seconds: float, size: int, telemetry: Telemetry, share: float = 0.8,
               pass_seconds: float = 0.0) -> Outcome:
    """Every visible CUDA device under SGEMM load at once for `seconds` (concurrently: one thread per
    GPU), every product checked, NVML sampling through the run, health counters before and after.
    The result: measured["burns"] (one per GPU) and measured["burn"] (the first, the report's old shape)."""
    cudart, cublas = state.get("cudart"), state.get("cublas")
    if cudart is None or cublas is None:
        return outcome("skip", "needs the cuda-runtime and cublas layers")
    devices = [d for d in state.get("devices") or [] if isinstance(d.get("index"), int)] or [DeviceEntry(index=0)]
    pass_seconds = pass_seconds or min(3.0, max(seconds / 4, 0.05))  # the burn overshoots by <= one pass
    plans = [_sized(cudart, d["index"], size, share) for d in devices]
    n = min(p["n"] for p in plans)
    plans = [burn_plan(p["free_bytes"], p["l2_bytes"], n, share) for p in plans]
    setup_t = time.monotonic()
    a, b = Operand(n, 1), Operand(n, 2)
    setup_s = time.monotonic() - setup_t
    before = health_of(state, devices)
    stop = threading.Event()
    burns = [GpuBurn(cudart, cublas, d, a, b, seconds, p, pass_seconds, stop) for d, p in zip(devices, plans)]
    with telemetry:
        for t in burns:
            t.start()
        for t in burns:
            t.join()
        started = [t.tally.start for t in burns if t.tally.start]
        telemetry.load(min(started) if started else 0.0, max(t.tally.end for t in burns))
    after = health_of(state, devices)
    cudart.cudaSetDevice(devices[0]["index"])
    t0 = telemetry.load_start or 0.0
    records = [_burn_record(t, d, p, telemetry.summary(i), before[i], after[i], setup_s, t0, len(burns))
               for i, (t, d, p) in enumerate(zip(burns, devices, plans))]
    return _burn_outcome(burns, records)


def health_of(state: State, devices: list[DeviceEntry]) -> list[Optional[Health]]:
    """Each device's health counters now (None where NVML cannot tell)."""
    reader = state.get("read_health")
    if reader is None:
        return [None for _ in devices]
    facts = reader(devices)
    if facts.get("error"):
        return [Health(error=facts.get("error")) for _ in devices]
    return [g.get("health") or (Health(error=g.get("error")) if g.get("error") else None)
            for g in facts.get("gpus", [])]


def _burn_record(t: GpuBurn, device: DeviceEntry, plan: BurnPlan, tele: TelemetrySummary,
                 before: Optional[Health], after: Optional[Health], setup_s: float,
                 t0: float, together: int) -> Burn:
    """One GPU's burn as the report keeps it; times relative to `t0`, the start of the load."""
    tally, n = t.tally, plan["n"]
    elapsed = max(tally.end - tally.start, 0.0)
    flop = tally.products * 2.0 * n ** 3
    gpu_s = tally.gpu_seconds if tally.timed and tally.gpu_seconds > 0 else None
    shares = tele.get("throttle_shares") or {}
    stats = tele.get("stats") or {}
    heat = judge.judge_heat(stats.get("temp_c"), stats.get("mem_temp_c"), tele.get("limits") or {}, shares)
    health = judge.judge_health(before, after)
    working = (2 + t.buffers) * plan["bytes_per_product"]
    record: Burn = {
        "kind": "cublas-sgemm", "gpu": {"cuda": device.get("index"), "name": device.get("name"),
                                        "uuid": device.get("uuid"), "pci": device.get("pci")},
        "gpus_under_load": together, "seconds": round(elapsed, 1), "loop_seconds": round(elapsed, 4),
        "setup_seconds": round(setup_s, 2), "n": n,
        "products": tally.products, "iterations": tally.products, "checks": tally.checks,
        "mismatches": tally.mismatches, "wrong_products": [{**w, "t": round(w["t"] - t0, 3)} for w in tally.wrong],
        "passes": tally.passes, "buffers": t.buffers, "working_set_bytes": working, "l2_bytes": plan["l2_bytes"],
        "free_bytes": plan["free_bytes"],
        "compared": "every product, on the GPU: C = A.B - C alternates between the product and 0, and each 0 is "
                    "summed (cublasSasum) and must be exactly 0; exact operands (multiples of 1/8), so any "
                    "difference is a wrong element",
        "host_reference": tally.host,
        "gflops": round(flop / max(elapsed, 1e-9) / 1e9, 1),
        "gpu_seconds": round(gpu_s, 3) if gpu_s else None,
        "gpu_gflops": round(flop / gpu_s / 1e9, 1) if gpu_s else None,
        "duty_cycle": round(gpu_s / elapsed, 4) if gpu_s and elapsed > 0 else None,
        "series": {"gflops": [[round(ts - t0, 3), v] for ts, v in tally.series]},
        "telemetry": tele, "throttled": sorted(r for r in shares if r != "gpu_idle"),
        "heat": heat, "load": judge.judge_load(stats, tele.get("limits") or {}, shares),
        "health": {**health, "before": before, "after": after},
    }
    record["line"] = judge.one_line(record)
    return record


def _burn_outcome(burns: list[GpuBurn], records: list[Burn]) -> Outcome:
    measured: Measured = {"burns": records, "burn": records[0], "concurrent": len(records) > 1}
    lines = [r["line"] for r in records]
    failed = next((t.failure for t in burns if t.failure is not None), None)
    if failed is not None:
        failed["measured"] = measured
        failed["summary"] = failed["summary"] + " | " + " | ".join(lines)
        return failed
    wrong = [r for r in records if r["mismatches"] or (r["host_reference"] or {}).get("mismatches")]
    sick = [r for r in records if r["health"]["state"] in ("needs_reset", "failing")]
    head = f"SGEMM burn on {len(records)} GPU(s) at once" if len(records) > 1 else "SGEMM burn"
    summary = f"{head}: " + " | ".join(lines)
    if wrong:
        return outcome("fail", summary, measured, hint="the GPU computed wrong results under load: check "
                       "`nvidia-smi -q -d ECC,ROW_REMAPPER` and `dmesg | grep -i xid`, cooling and power; do not "
                       "trust this card for training")
    if sick:
        return outcome("fail", summary, measured, hint=judge.HEALTH_HINT[sick[0]["health"]["state"]])
    hot = [r for r in records if r["heat"]["verdict"] in ("hot", "slowing")]
    if hot:  # a working GPU (laptops throttle by design): flagged, not failed
        return outcome("pass", summary, measured, hint="the GPU ran hot under full load: check its cooling "
                       "(airflow, fan curve, dust) and `nvidia-smi -q -d TEMPERATURE,PERFORMANCE`")
    return outcome("pass", summary, measured)
