"""Layer 5 (TensorFlow in the env) and layer 6 (benchmark, burn) of the GPU check.

Imported by check.py inside the target env. TensorFlow and numpy are imported here only,
lazily: the env has them when TensorFlow installed, and layers 0-4 must run without them.
TF's C++ log goes to fd 2; check.py captures it and `parse_tf_log` reads it.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck import tfgpucheck_nvml as nvml
    from tfgpu_install.verify.gpucheck.tfgpucheck_cuda import outcome
else:
    import tfgpucheck_nvml as nvml
    from tfgpucheck_cuda import outcome


def _env_prefix() -> str:
    """The env this check runs in (shell-quoted when it needs it), for the doctor command to name."""
    import shlex
    import sys

    return shlex.quote(sys.prefix)


_DLOPEN = re.compile(r"Could not load dynamic library '([^']+)'(?:; dlerror: (.*))?")
_CUDNN_LOADED = re.compile(r"Loaded cuDNN version (\d+)")
# TensorRT is optional for TF: failing to load it never explains a missing GPU.
_HARMLESS = ("libnvinfer", "nvinfer")
_CREATED = re.compile(r"Created device (\S+) with (\d+) MB memory: .*?name: (.*?), pci bus id: (\S+?),"
                      r"(?: compute capability: (\d+\.\d+))?")


def parse_tf_log(text: str) -> dict[str, Any]:
    """What TF's own log says: libraries it failed to dlopen, devices it created, errors."""
    # TF appends the whole LD_LIBRARY_PATH to each dlerror: the loader's message is enough.
    missing = [{"library": m.group(1), "dlerror": (m.group(2) or "").split("; LD_LIBRARY_PATH")[0].strip()}
               for m in _DLOPEN.finditer(text)]
    created = [{"device": m.group(1), "memory_mb": int(m.group(2)), "name": m.group(3), "pci": m.group(4),
                "compute_capability": m.group(5)} for m in _CREATED.finditer(text)]
    for m in missing:
        m["harmless"] = m["library"].startswith(_HARMLESS)
    notes = []
    for line in text.splitlines():
        if any(k in line for k in ("Cannot dlopen some GPU libraries", "Could not find cuda drivers", "CUDA_ERROR",
                                   "cudaError", "kernel driver does not appear", "failed call to cuInit")):
            notes.append(line.strip()[-300:])
    loaded = _CUDNN_LOADED.search(text)
    return {"dlopen_failures": missing, "created_devices": created, "notes": notes[:20],
            "cudnn_loaded": int(loaded.group(1)) if loaded else None}


def _device_kind(name: str) -> str:
    """'/job:localhost/replica:0/task:0/device:GPU:0' or '/GPU:0' -> 'GPU:0'."""
    parts = name.upper().replace("DEVICE:", "").strip("/").split("/")
    return parts[-1]


def conv2d_reference(x: Any, w: Any) -> Any:
    """VALID, stride-1 NHWC conv2d in numpy (the check's independent answer)."""
    import numpy as np

    n, h, wd, _ = x.shape
    kh, kw, _, co = w.shape
    out = np.zeros((n, h - kh + 1, wd - kw + 1, co), dtype=np.float64)
    for i in range(h - kh + 1):
        for j in range(wd - kw + 1):
            out[:, i, j, :] = np.tensordot(x[:, i:i + kh, j:j + kw, :], w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def layer_tensorflow(plan: dict[str, Any], device: str, gpu_mode: bool, tf_log: Callable[[], str],
                     state: dict[str, Any], require_gpu_list: bool = True) -> dict[str, Any]:
    # Our own subprocess, log captured: keep "Created device" lines, and have the loader name every
    # library it fails to dlopen (TF >= 2.14 only says so at VLOG level: "Cannot dlopen some GPU libraries").
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    os.environ.setdefault("TF_CPP_VMODULE", "dso_loader=1,cuda_diagnostics=1")
    t0 = time.monotonic()
    try:
        import numpy as np
        import tensorflow as tf
    except Exception as exc:  # ImportError, numpy ABI errors, protobuf conflicts...
        return outcome("fail", f"import tensorflow failed: {type(exc).__name__}: {str(exc)[:300]}",
                       hint=f"run `tfgpu-install doctor --env {_env_prefix()}` for the cause "
                       "(numpy/protobuf pins, missing libraries)")
    measured: dict[str, Any] = {"tensorflow": tf.__version__, "import_seconds": round(time.monotonic() - t0, 2)}
    state["tf"] = tf
    info = dict(tf.sysconfig.get_build_info())
    build = {k: info.get(k) for k in ("is_cuda_build", "cuda_version", "cudnn_version", "cuda_compute_capabilities")}
    measured["build"] = build
    if gpu_mode and not build.get("is_cuda_build"):
        return outcome("fail", f"TensorFlow {tf.__version__} is a CPU-only build", measured,
                       hint="install the `tensorflow` package (not tensorflow-cpu): re-run `tfgpu-install`")
    for key, want in (("cuda_version", plan.get("cuda")), ("cudnn_version", plan.get("cudnn"))):
        have = build.get(key)
        if want and have:
            n = min(len(str(have).split(".")), len(str(want).split(".")), 2)
            if str(have).split(".")[:n] != str(want).split(".")[:n]:
                return outcome("fail", f"TensorFlow was built for {key.split('_')[0]} {have}, the plan placed "
                               f"{want}", measured, hint="re-run `tfgpu-install` so the env matches its plan")
    gpus = tf.config.list_physical_devices("GPU")
    for g in gpus:
        try:
            tf.config.experimental.set_memory_growth(g, True)  # don't take the whole card for a check
        except RuntimeError:
            pass
    measured["gpus"] = [g.name for g in gpus]
    details = []
    for g in gpus:
        try:
            cc = tf.config.experimental.get_device_details(g).get("compute_capability")
            details.append({"name": g.name, "compute_capability": ".".join(map(str, cc)) if cc else None})
        except Exception:
            details.append({"name": g.name, "compute_capability": None})
    state["tf_gpus"] = details
    if gpu_mode and not gpus and require_gpu_list:
        log = parse_tf_log(tf_log())
        libs = [d["library"] for d in log["dlopen_failures"] if not d["harmless"]]
        why = f": could not load {', '.join(libs)}" if libs else ""
        return outcome("fail", f"TensorFlow sees no GPU{why}", dict(measured, log=log),
                       hint="the library TF names is missing from its search path: check the env's activation "
                       "(LD_LIBRARY_PATH) or run `tfgpu-install doctor`")
    try:
        tf.config.experimental.enable_tensor_float_32_execution(False)  # exact float32 for the comparison
    except Exception:
        pass
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    with tf.device(device):
        c = tf.matmul(a, b)
    want_kind = _device_kind(device)
    measured["matmul_device"] = c.device
    if _device_kind(c.device) != want_kind:
        return outcome("fail", f"the matmul pinned to {device} ran on {c.device}", measured,
                       hint="TensorFlow fell back to another device: check its log for the GPU kernel failure")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(c.numpy() - ref)))
    measured["matmul_max_abs_error"] = err
    if err > 1e-2:
        return outcome("fail", f"matmul 512x512 on {want_kind} differs from numpy (max error {err:g})", measured)
    x = rng.standard_normal((2, 12, 12, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
    with tf.device(device):
        y = tf.nn.conv2d(x, w, strides=1, padding="VALID")
    cerr = float(np.max(np.abs(y.numpy() - conv2d_reference(x, w))))
    measured["conv2d_device"] = y.device
    measured["conv2d_max_abs_error"] = cerr
    if _device_kind(y.device) != want_kind or cerr > 1e-3:
        return outcome("fail", f"conv2d on {want_kind} is wrong or ran elsewhere ({y.device}, max error {cerr:g})",
                       measured, hint="cuDNN failed for TF: check the captured log and `tfgpu-install doctor`")
    if gpus:
        measured["created_devices"] = parse_tf_log(tf_log())["created_devices"]
    try:
        strategy = tf.distribute.MirroredStrategy()
        measured["mirrored_replicas"] = int(strategy.num_replicas_in_sync)
    except Exception as exc:
        measured["mirrored_error"] = f"{type(exc).__name__}: {exc}"
    return outcome("pass", f"TensorFlow {tf.__version__}: matmul and conv2d on {want_kind} match numpy "
                   f"(max errors {err:.1e}, {cerr:.1e}); {len(gpus)} GPU(s) listed", measured)


# ---- layer 6 -------------------------------------------------------------------------------------
def _time_matmul(tf: Any, device: str, n: int, reps: int) -> float:
    with tf.device(device):
        a = tf.random.uniform((n, n), dtype=tf.float32)
        b = tf.random.uniform((n, n), dtype=tf.float32)
        float(tf.reduce_sum(tf.matmul(a, b)).numpy())  # warm-up: kernels loaded, memory allocated
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            float(tf.reduce_sum(tf.matmul(a, b)).numpy())  # .numpy() waits for the device
            best = min(best, time.perf_counter() - t)
    return best


def benchmark(tf: Any, device: str, sizes: list[int], reps: int = 3) -> dict[str, Any]:
    rows = []
    for n in sizes:
        flop = 2.0 * n ** 3
        cpu = _time_matmul(tf, "/CPU:0", n, reps)
        dev = _time_matmul(tf, device, n, reps)
        rows.append({"n": n, "cpu_gflops": round(flop / cpu / 1e9, 1), "gpu_gflops": round(flop / dev / 1e9, 1),
                     "speedup": round(cpu / dev, 2)})
    tf32 = False
    try:
        tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    except Exception:
        pass
    return {"device": device, "precision": "float32" + (" (TF32 on)" if tf32 else " (TF32 off)"), "sizes": rows}


def burn(tf: Any, device: str, seconds: float, n: int = 4096, telemetry: Any = None) -> dict[str, Any]:
    """Sustained matmuls for `seconds`, every result compared element by element with the first
    (gpu-burn's idea: a card that overheats or has bad memory starts computing wrong numbers).
    max|C - C0| is order-independent, so a reduction's float rounding cannot fake an error."""
    import numpy as np

    with tf.device(device):
        a = tf.random.stateless_uniform((n, n), seed=(1, 2))
        b = tf.random.stateless_uniform((n, n), seed=(3, 4))
        ref = tf.matmul(a, b)
        tol = 1e-5 * float(tf.reduce_max(tf.abs(ref)).numpy())
    iters = mismatches = 0
    worst = 0.0
    batch = 16  # matmuls queued per sync: the device stays busy instead of waiting on the host
    if telemetry is None:
        telemetry = nvml.Telemetry()
    with telemetry as tel:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            with tf.device(device):
                errs = tf.stack([tf.reduce_max(tf.abs(tf.matmul(a, b) - ref)) for _ in range(batch)]).numpy()
            iters += batch
            mismatches += int(np.sum(errs > tol))
            worst = max(worst, float(np.max(errs)))
        elapsed = time.monotonic() - start
    tele = tel.summary()
    bad = [r for r in tele.get("throttle_reasons", []) if r != "sw_power_cap"]
    return {"seconds": round(elapsed, 1), "n": n, "iterations": iters, "mismatches": mismatches,
            "max_abs_error": worst, "gflops": round(iters * 2.0 * n ** 3 / max(elapsed, 1e-9) / 1e9, 1),
            "telemetry": tele, "throttled": bad}
