"""Layer 3 of the GPU check: cuDNN loaded, matched with the plan and the CUDA runtime, and used: a small
convolution forward on every visible GPU with every algorithm cuDNN offers for it, compared with an
exact host result, then once with tensor-op math at a TF32 tolerance (stdlib + ctypes; runs in the env).

The legacy convolution API (cudnnConvolutionForward and its descriptors) is exported by cuDNN 8 and by
cuDNN 9's libcudnn.so.9 shim. The data are small integers, so every product and sum is exact in float32
and in TF32: a direct or GEMM-based algorithm must give the host's numbers exactly (1e-5 relative is
allowed), an FFT or Winograd one to 1e-3 of the largest output, tensor-op math to 1e-2.
"""

from __future__ import annotations

import ctypes
import os
import random
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck import tfgpucheck_known as known
    from tfgpu_install.verify.gpucheck.tfgpucheck_codes import (
        CUDA_ERROR,
        CUDNN8_STATUS,
        CUDNN_STATUS,
        code_name,
        outcome,
    )
    from tfgpu_install.verify.gpucheck.tfgpucheck_libs import (
        CUDNN,
        CUDNN9_OPTIONAL,
        CUDNN9_SUBLIBS,
        cuda_int,
        cudnn_int,
        find_file,
        load_library,
        loaded_path,
        major,
        search_dirs,
        sonames,
        version_matches,
    )
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        CheckPlan,
        ConvForward,
        DeviceEntry,
        Measured,
        Offered,
        Outcome,
        State,
    )
else:
    import tfgpucheck_known as known
    from tfgpucheck_codes import CUDA_ERROR, CUDNN8_STATUS, CUDNN_STATUS, code_name, outcome
    from tfgpucheck_libs import (
        CUDNN,
        CUDNN9_OPTIONAL,
        CUDNN9_SUBLIBS,
        cuda_int,
        cudnn_int,
        find_file,
        load_library,
        loaded_path,
        major,
        search_dirs,
        sonames,
        version_matches,
    )

def _cudnn_sublibraries(libdir: str) -> tuple[dict[str, str], list[str]]:
    """cuDNN 9's run-time loaded parts, each loaded from libcudnn.so.9's own directory:
    ({name: path} loaded, ["name: why"] missing or broken)."""
    loaded: dict[str, str] = {}
    bad: list[str] = []
    for name in CUDNN9_SUBLIBS + CUDNN9_OPTIONAL:
        path = os.path.join(libdir, name)
        if not os.path.exists(path):
            if name in CUDNN9_SUBLIBS:
                bad.append(f"{name}: missing")
            continue
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            loaded[name] = path
        except OSError as exc:
            bad.append(f"{name}: {exc}")
    return loaded, bad


_REINSTALL = "re-run `tfgpu-install` to reinstall the nvidia-cudnn wheel (or pass --cudnn-source)"


def _cudnn9_parts_first(path: str, names: list[str], measured: Measured) -> Optional[Outcome]:
    """cuDNN 9's libcudnn.so.9 is a shim whose first call loads libcudnn_graph.so.9 (and aborts the
    process when it cannot): every required sub-library must exist and load before that call."""
    real = path if os.path.isabs(path) else (loaded_path(names[0]) or path)
    if not os.path.basename(real).startswith("libcudnn.so.9"):
        return None
    libdir = os.path.dirname(real)
    loaded, bad = _cudnn_sublibraries(libdir)
    measured["sublibraries"] = sorted(loaded)
    if not bad:
        return None
    return outcome("fail", f"cuDNN 9: sub-libraries next to {path} do not load ({'; '.join(bad)})", measured,
                   hint="cuDNN 9 loads these at run time (a missing libcudnn_graph.so.9 aborts the process in its "
                   f"first call, and TensorFlow would fail on its first convolution): {_REINSTALL}")


def _cudnn_cuda_mismatch(lib: Any, version: str, state: State, measured: Measured) -> Optional[Outcome]:
    if not hasattr(lib, "cudnnGetCudartVersion") or not state.get("runtime_version"):
        return None
    lib.cudnnGetCudartVersion.restype = ctypes.c_size_t
    built_for = cuda_int(int(lib.cudnnGetCudartVersion()))
    measured["cudnn_cuda"] = built_for
    runtime = cuda_int(int(state["runtime_version"]))
    if major(built_for) == major(runtime):
        return None
    return outcome("fail", f"cuDNN {version} was built for CUDA {built_for}, the CUDA runtime is {runtime}",
                   measured, hint=f"install the cuDNN build for this CUDA major (nvidia-cudnn-cu{major(runtime)}): "
                   f"{_REINSTALL}")


def _sm(cc: str) -> int:
    """'9.0' -> 900, '12.0' -> 1200: cuDNN's SM numbering (major*100 + minor*10)."""
    maj, _, minor = cc.partition(".")
    return int(maj) * 100 + int(minor or 0) * 10 if maj.isdigit() and (minor or "0").isdigit() else 0


def forward_compat_note(lib: Any, state: State, measured: Measured) -> Optional[str]:
    """cuDNN 9 runs a GPU newer than its newest native SM in forward-compatibility mode (PTX JIT,
    some operations unsupported): read cudnnGetMaxDeviceVersion and say so."""
    if not hasattr(lib, "cudnnGetMaxDeviceVersion"):
        return None
    lib.cudnnGetMaxDeviceVersion.restype = ctypes.c_size_t
    max_sm = int(lib.cudnnGetMaxDeviceVersion())
    measured["cudnn_max_device_sm"] = max_sm
    ccs = (d.get("compute_capability") for d in state.get("devices", []))
    newer = sorted({cc for cc in ccs if cc and _sm(cc) > max_sm})
    if not newer:
        return None
    measured["forward_compatibility"] = newer
    return (f"cuDNN's newest native GPU is sm_{max_sm // 10}; compute capability {', '.join(newer)} runs in "
            "forward-compatibility mode (kernels JIT-compiled from PTX, slower, some operations unsupported): "
            "install a newer cuDNN 9 that supports this GPU natively")



ALGOS = ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
         "WINOGRAD_NONFUSED")  # cudnnConvolutionFwdAlgo_t
_TRANSFORMS = {4, 5, 6, 7}  # FFT and Winograd round: a tolerance, not exactness
_FMA_MATH, _TENSOR_OP_MATH = 3, 1  # cudnnMathType_t: FMA only (no TF32), tensor cores allowed
_NCHW, _FLOAT, _CROSS_CORRELATION = 0, 0, 1
_H2D, _D2H = 1, 2
# The problem: x 2x8x12x12, w 16x8x3x3, padding 1: sums of 72 products of integers in [-3, 3] x [-2, 2].
SHAPE_X, SHAPE_W, PAD = (2, 8, 12, 12), (16, 8, 3, 3), 1
MAX_WORKSPACE = 256 * 2**20


class FwdPerf(ctypes.Structure):  # cudnnConvolutionFwdAlgoPerf_t (cudnn_cnn.h)
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int), ("mathType", ctypes.c_int),
                ("reserved", ctypes.c_int * 3)]


def conv_reference(x: list[float], w: list[float]) -> list[float]:
    """The convolution on the host, NCHW cross-correlation, stride 1, padding PAD (exact: integers)."""
    n, c, h, wd = SHAPE_X
    k, _, r, s = SHAPE_W
    out = [0.0] * (n * k * h * wd)
    for b in range(n):
        for o in range(k):
            for i in range(h):
                for j in range(wd):
                    acc = 0.0
                    for ch in range(c):
                        for dr in range(r):
                            ii = i - PAD + dr
                            if ii < 0 or ii >= h:
                                continue
                            for ds in range(s):
                                jj = j - PAD + ds
                                if 0 <= jj < wd:
                                    acc += x[((b * c + ch) * h + ii) * wd + jj] * w[((o * c + ch) * r + dr) * s + ds]
                    out[((b * k + o) * h + i) * wd + j] = acc
    return out


def _size(shape: tuple[int, ...]) -> int:
    out = 1
    for v in shape:
        out *= v
    return out


class ConvCheck:
    """The convolution on one GPU: handle, descriptors, device buffers; `run(math)` tries algorithms."""

    def __init__(self, lib: Any, cudart: Any, table: dict[int, str], device: int) -> None:
        self.lib, self.rt, self.table, self.dev = lib, cudart, table, device
        self.handle = ctypes.c_void_p()
        self.descs: list[tuple[str, ctypes.c_void_p]] = []
        self.ptrs: list[ctypes.c_void_p] = []
        rng = random.Random(device + 11)
        self.x = [float(rng.randint(-3, 3)) for _ in range(_size(SHAPE_X))]
        self.w = [float(rng.randint(-2, 2)) for _ in range(_size(SHAPE_W))]
        self.ref = conv_reference(self.x, self.w)
        self.y_shape = (SHAPE_X[0], SHAPE_W[0], SHAPE_X[2], SHAPE_X[3])

    def _st(self, rc: int) -> str:
        return f"{code_name(self.table, rc, self.lib, 'cudnnGetErrorString')} ({rc})"

    def _call(self, fn: str, *args: Any) -> Optional[str]:
        rc = int(getattr(self.lib, fn)(*args))
        return None if rc == 0 else f"{fn} failed: {self._st(rc)}"

    def _rt(self, rc: int, what: str) -> Optional[str]:
        if rc == 0:
            return None
        return f"{what} failed: {code_name(CUDA_ERROR, rc, self.rt, 'cudaGetErrorName')} ({rc})"

    def _desc(self, kind: str) -> tuple[ctypes.c_void_p, Optional[str]]:
        d = ctypes.c_void_p()
        failed = self._call(f"cudnnCreate{kind}Descriptor", ctypes.byref(d))
        if failed is None:
            self.descs.append((kind, d))
        return d, failed

    def _alloc(self, nbytes: int) -> tuple[ctypes.c_void_p, Optional[str]]:
        p = ctypes.c_void_p()
        failed = self._rt(self.rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(nbytes)), "cudaMalloc")
        if failed is None:
            self.ptrs.append(p)
        return p, failed

    def setup(self) -> Optional[str]:
        """Handle on this device, descriptors, x and w uploaded, y allocated: None or what failed."""
        failed = self._rt(self.rt.cudaSetDevice(self.dev), f"cudaSetDevice({self.dev})") or \
            self._call("cudnnCreate", ctypes.byref(self.handle))
        if failed:
            self.handle = ctypes.c_void_p()
            return failed
        self.xd, failed = self._desc("Tensor")
        self.wd, failed2 = self._desc("Filter")
        self.cd, failed3 = self._desc("Convolution")
        self.yd, failed4 = self._desc("Tensor")
        failed = failed or failed2 or failed3 or failed4 or \
            self._call("cudnnSetTensor4dDescriptor", self.xd, _NCHW, _FLOAT, *SHAPE_X) or \
            self._call("cudnnSetFilter4dDescriptor", self.wd, _FLOAT, _NCHW, *SHAPE_W) or \
            self._call("cudnnSetConvolution2dDescriptor", self.cd, PAD, PAD, 1, 1, 1, 1, _CROSS_CORRELATION, _FLOAT)
        if failed:
            return failed
        dims = [ctypes.c_int() for _ in range(4)]
        failed = self._call("cudnnGetConvolution2dForwardOutputDim", self.cd, self.xd, self.wd,
                            *[ctypes.byref(d) for d in dims])
        if failed:
            return failed
        if tuple(d.value for d in dims) != self.y_shape:
            return f"cudnnGetConvolution2dForwardOutputDim gave {[d.value for d in dims]}, not {list(self.y_shape)}"
        failed = self._call("cudnnSetTensor4dDescriptor", self.yd, _NCHW, _FLOAT, *self.y_shape)
        if failed:
            return failed
        self.xp, failed = self._alloc(4 * len(self.x))
        self.wp, failed2 = self._alloc(4 * len(self.w))
        self.yp, failed3 = self._alloc(4 * len(self.ref))
        if failed or failed2 or failed3:
            return failed or failed2 or failed3
        for ptr, data in ((self.xp, self.x), (self.wp, self.w)):
            host = (ctypes.c_float * len(data))(*data)
            failed = self._rt(self.rt.cudaMemcpy(ptr, host, ctypes.c_size_t(4 * len(data)), _H2D), "cudaMemcpy")
            if failed:
                return failed
        return None

    def offered(self, math: int) -> tuple[list[FwdPerf], Optional[str]]:
        """cudnnGetConvolutionForwardAlgorithm_v7's list for this math type: every entry, with its status."""
        failed = self._call("cudnnSetConvolutionMathType", self.cd, math)
        if failed:
            return [], failed
        perf = (FwdPerf * len(ALGOS))()
        got = ctypes.c_int(0)
        failed = self._call("cudnnGetConvolutionForwardAlgorithm_v7", self.handle, self.xd, self.wd, self.cd, self.yd,
                            len(ALGOS), ctypes.byref(got), perf)
        return list(perf[:max(0, min(got.value, len(ALGOS)))]), failed

    def forward(self, algo: int, tolerance: float) -> ConvForward:
        """One cudnnConvolutionForward with `algo`, compared with the host: {algo, status, max_abs_error, ok}."""
        name = ALGOS[algo] if 0 <= algo < len(ALGOS) else f"algo {algo}"
        out: ConvForward = {"algo": name, "ok": False}
        size = ctypes.c_size_t(0)
        failed = self._call("cudnnGetConvolutionForwardWorkspaceSize", self.handle, self.xd, self.wd, self.cd, self.yd,
                            algo, ctypes.byref(size))
        if failed:
            return {**out, "status": failed}
        if size.value > MAX_WORKSPACE:
            return {**out, "ok": True, "status": f"not run: needs {size.value >> 20} MiB of workspace"}
        ws = ctypes.c_void_p()
        if size.value:
            ws, failed = self._alloc(size.value)
            if failed:
                return {**out, "status": failed}
        zero = (ctypes.c_float * len(self.ref))()
        failed = self._rt(self.rt.cudaMemcpy(self.yp, zero, ctypes.c_size_t(4 * len(self.ref)), _H2D), "cudaMemcpy")
        if failed:
            return {**out, "status": failed}
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        rc = int(self.lib.cudnnConvolutionForward(self.handle, ctypes.byref(alpha), self.xd, self.xp, self.wd, self.wp,
                                                  self.cd, algo, ws, ctypes.c_size_t(size.value), ctypes.byref(beta),
                                                  self.yd, self.yp))
        out["workspace"] = size.value
        if rc != 0:
            return {**out, "status": f"cudnnConvolutionForward failed: {self._st(rc)}", "code": rc}
        y = (ctypes.c_float * len(self.ref))()
        failed = self._rt(self.rt.cudaMemcpy(y, self.yp, ctypes.c_size_t(4 * len(self.ref)), _D2H), "cudaMemcpy")
        if failed:
            return {**out, "status": failed}
        worst = max(abs(float(a) - b) for a, b in zip(y, self.ref))
        limit = tolerance * max(1.0, max(abs(v) for v in self.ref))
        ok = worst <= limit
        return {**out, "status": "ok" if ok else f"wrong results (max error {worst:g} > {limit:g})",
                "max_abs_error": worst, "ok": ok}

    def close(self) -> None:
        for kind, d in self.descs:
            getattr(self.lib, f"cudnnDestroy{kind}Descriptor")(d)
        for p in self.ptrs:
            self.rt.cudaFree(p)
        if self.handle.value:
            self.lib.cudnnDestroy(self.handle)


def _conv_on(lib: Any, cudart: Any, table: dict[int, str], dev: int) -> DeviceEntry:
    """Every algorithm cuDNN offers for the problem on CUDA device `dev` (FMA math: exact), then the
    first one it offers with tensor-op math (TF32 tolerance). {"device", "algorithms", "tensor_op",
    "failure": None or what failed}."""
    check = ConvCheck(lib, cudart, table, dev)
    ran: list[ConvForward] = []
    out: DeviceEntry = {"device": dev, "algorithms": ran, "tensor_op": None, "failure": None}
    try:
        failed = check.setup()
        if failed:
            out["failure"] = failed
            return out
        perf, failed = check.offered(_FMA_MATH)
        if failed:
            out["failure"] = failed
            return out
        usable = [p for p in perf if p.status == 0]
        offered: list[Offered] = [{"algo": ALGOS[p.algo] if 0 <= p.algo < len(ALGOS) else p.algo,
                                   "status": check._st(p.status) if p.status else "ok"} for p in perf]
        out["offered"] = offered
        if not usable:
            why = ", ".join(f"{e['algo']}: {e['status']}" for e in offered) or "none listed"
            out["failure"] = f"cuDNN offers no forward algorithm for this GPU ({why})"
            return out
        for p in usable:
            res = check.forward(p.algo, 1e-3 if p.algo in _TRANSFORMS else 1e-5)
            ran.append(res)
            if not res.get("ok") and out.get("failure") is None:
                out["failure"] = f"{res.get('algo')}: {res.get('status')}"
        perf, failed = check.offered(_TENSOR_OP_MATH)
        tensor = [p for p in perf if p.status == 0]
        if failed or not tensor:
            out["tensor_op"] = {"status": failed or "no algorithm offered with tensor-op math"}
        else:
            res = check.forward(tensor[0].algo, 1e-2)
            out["tensor_op"] = res
            if not res.get("ok") and out.get("failure") is None:
                out["failure"] = f"{res.get('algo')} with tensor-op math: {res.get('status')}"
        return out
    finally:
        check.close()


def nvrtc_path(plan: CheckPlan, state: State) -> Optional[str]:
    """Where libnvrtc.so.<CUDA major> is: cuDNN 9's runtime-compiled engines load it when used."""
    runtime = state.get("runtime_version")
    want = major(plan.get("cuda")) or (int(runtime) // 1000 if runtime else None)
    if want is None:
        return None
    name = f"libnvrtc.so.{want}"
    found = find_file([name], search_dirs(plan, "cuda_nvrtc"))
    if found:
        return found
    try:
        ctypes.CDLL(name)
    except OSError:
        return None
    return loaded_path(name) or name


def _known_cause(version: str, state: State) -> Optional[str]:
    """The architecture floor (cuDNN >= 9.11 on cc < 7.5), when this GPU and this cuDNN hit it."""
    ccs = [cc for cc in (d.get("compute_capability") for d in state.get("devices", [])) if cc]
    hits = known.floor_hits("cudnn", version, ccs, state.get("plan"))
    return known.floor_words(hits[0], version) if hits else None


def layer_cudnn(plan: CheckPlan, state: State) -> Outcome:
    names = sonames("libcudnn.so", major(plan.get("cudnn")), CUDNN)
    lib, path, errors = load_library(names, search_dirs(plan, "cudnn"))
    if lib is None:
        return outcome("fail", f"{names[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint="cuDNN is missing from the env: re-run `tfgpu-install` (or pass --cudnn-source)")
    measured: Measured = {"libcudnn": path}
    failure = _cudnn9_parts_first(path, names, measured)
    if failure is not None:
        return failure
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    version = cudnn_int(int(lib.cudnnGetVersion()))
    measured["cudnn"] = version
    expected = plan.get("cudnn")
    if expected and not version_matches(version, str(expected)):
        return outcome("fail", f"cuDNN {version} loaded from {path}, but the plan placed {expected}", measured,
                       hint="another cuDNN comes first on the library path: `tfgpu-install doctor` lists stale "
                       "copies; re-run the install with --quarantine-stale")
    failure = _cudnn_cuda_mismatch(lib, version, state, measured)
    if failure is not None:
        return failure
    note = forward_compat_note(lib, state, measured) if major(version) == 9 else None
    table = CUDNN_STATUS if major(version) == 9 else CUDNN8_STATUS
    if major(version) == 9:
        measured["nvrtc"] = nvrtc_path(plan, state)
    cudart = state.get("cudart") if state.get("runtime_ok") else None
    if cudart is None:  # no working runtime to allocate with: the handle alone
        return _handle_only(lib, table, version, path, expected, measured, note)
    indices = [d["index"] for d in state.get("devices") or [] if isinstance(d.get("index"), int)] or [0]
    measured["devices"] = devices = []
    for dev in indices:
        res = _conv_on(lib, cudart, table, dev)
        devices.append(res)
        if res.get("failure"):
            return _conv_failure(res, version, path, indices, state, measured)
    cudart.cudaSetDevice(indices[0])
    measured["handle"] = "created and destroyed"
    ran = [a for a in devices[0].get("algorithms", []) if a.get("max_abs_error") is not None]
    tensor = devices[0].get("tensor_op") or {}
    subs = f", {len(measured['sublibraries'])} sub-libraries loaded" if "sublibraries" in measured else ""
    where = f" on {len(indices)} GPUs" if len(indices) > 1 else ""
    summary = (f"cuDNN {version} ({path}){subs}: a convolution{where} with {len(ran)} algorithm(s) "
               f"({', '.join(str(a.get('algo')) for a in ran)}) matches the host"
               + ("; with tensor-op math too" if tensor.get("ok") and tensor.get("max_abs_error") is not None else
                  f"; tensor-op math: {tensor.get('status')}" if tensor else "")
               + (f"; as planned ({expected})" if expected else ""))
    return outcome("pass", summary, measured, hint=note)


def _handle_only(lib: Any, table: dict[int, str], version: str, path: str, expected: Optional[str],
                 measured: Measured, note: Optional[str]) -> Outcome:
    handle = ctypes.c_void_p()
    rc = lib.cudnnCreate(ctypes.byref(handle))
    if rc != 0:
        return outcome("fail", f"cuDNN {version} ({path}): cudnnCreate failed: "
                       f"{code_name(table, rc, lib, 'cudnnGetErrorString')} ({rc})", measured,
                       hint="cuDNN could not initialise on the GPU: check `nvidia-smi` (memory, other processes) "
                       "and that cuDNN matches the CUDA runtime")
    lib.cudnnDestroy(handle)
    measured["handle"] = "created and destroyed"
    measured["convolution"] = "not run: needs a working CUDA runtime (the cuda-runtime layer)"
    return outcome("pass", f"cuDNN {version} ({path}), handle created (no convolution: the cuda-runtime layer did "
                   "not pass)" + (f"; as planned ({expected})" if expected else ""), measured, hint=note)


def _conv_failure(res: DeviceEntry, version: str, path: str, indices: list[int], state: State,
                  measured: Measured) -> Outcome:
    where = f"GPU {res.get('device')}: " if len(indices) > 1 else ""
    text = res.get("failure") or ""
    if text.startswith("cudnnCreate failed"):
        return outcome("fail", f"cuDNN {version} ({path}): {where}{text}", measured,
                       hint="cuDNN could not initialise on the GPU: check `nvidia-smi` (memory, other processes) "
                       "and that cuDNN matches the CUDA runtime")
    hint = _known_cause(version, state)
    if hint is None and major(version) == 9 and not measured.get("nvrtc"):
        hint = ("libnvrtc (the CUDA runtime compiler) is not found: cuDNN 9's runtime-compiled engines need it "
                "(install nvidia-cuda-nvrtc for this CUDA, or re-run `tfgpu-install`)")
    if hint is None:
        hint = ("cuDNN fails on this GPU: TensorFlow's first convolution would fail the same way; check that this "
                "cuDNN supports the GPU (`tfgpu-install plan`), `nvidia-smi` and `dmesg | grep -i xid`")
    return outcome("fail", f"cuDNN {version} ({path}): {where}convolution forward failed: {text}", measured,
                   hint=hint)
