"""The tensorflow layer (TensorFlow in the env) and the benchmark layer (benchmark, burn) of the GPU check.

Imported by check.py inside the target env. TensorFlow and numpy are imported here only,
lazily: the env has them when TensorFlow installed, and the GPU layers must run without them.
TF's C++ log goes to fd 2; check.py captures it and `parse_tf_log` reads it.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck import tfgpucheck_nvml as nvml
    from tfgpu_install.verify.gpucheck.tfgpucheck_cuda import outcome
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        AllReduce,
        Benchmark,
        BenchRow,
        Burn,
        CheckPlan,
        CreatedDevice,
        DlopenFailure,
        Headline,
        Measured,
        MixedPrecisionAdvice,
        Outcome,
        State,
        TfBuild,
        TfGpu,
        TfLogFacts,
    )
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


def parse_tf_log(text: str) -> TfLogFacts:
    """What TF's own log says: libraries it failed to dlopen, devices it created, errors."""
    # TF appends the whole LD_LIBRARY_PATH to each dlerror: the loader's message is enough.
    missing: list[DlopenFailure] = [{"library": m.group(1),
                                     "dlerror": (m.group(2) or "").split("; LD_LIBRARY_PATH")[0].strip()}
                                    for m in _DLOPEN.finditer(text)]
    created: list[CreatedDevice] = [{"device": m.group(1), "memory_mb": int(m.group(2)), "name": m.group(3),
                                     "pci": m.group(4), "compute_capability": m.group(5)}
                                    for m in _CREATED.finditer(text)]
    for m in missing:
        m["harmless"] = m.get("library", "").startswith(_HARMLESS)
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


class Tf32Off:
    """TF32 off for the exactness checks, and the setting it had put back afterwards (a TF32-capable
    GPU would otherwise round float32 matmuls to 10-bit mantissas, and the user's choice must stay)."""

    def __init__(self, tf: Any) -> None:
        self.tf = tf
        self.before: Optional[bool] = None

    def __enter__(self) -> "Tf32Off":
        try:
            self.before = bool(self.tf.config.experimental.tensor_float_32_execution_enabled())
            self.tf.config.experimental.enable_tensor_float_32_execution(False)
        except (AttributeError, RuntimeError, TypeError):  # an old TF without the switch: nothing to restore
            self.before = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.before is not None:
            self.tf.config.experimental.enable_tensor_float_32_execution(self.before)


def _exact_ops(tf: Any, np: Any, device: str, measured: Measured) -> Optional[Outcome]:
    """matmul and conv2d pinned to `device`, compared with numpy; None, or the failure."""
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
    return None


def layer_tensorflow(plan: CheckPlan, device: str, gpu_mode: bool, tf_log: Callable[[], str],
                     state: State, require_gpu_list: bool = True) -> Outcome:
    # Our own subprocess, log captured: keep "Created device" lines, and have the loader name every
    # library it fails to dlopen (TF >= 2.14 only says so at VLOG level: "Cannot dlopen some GPU libraries").
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    os.environ.setdefault("TF_CPP_VMODULE", "dso_loader=1,cuda_diagnostics=1")
    t0 = time.monotonic()
    try:
        import numpy as np
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001  (recorded: ImportError, numpy ABI errors, protobuf conflicts...)
        return outcome("fail", f"import tensorflow failed: {type(exc).__name__}: {str(exc)[:300]}",
                       hint=f"run `tfgpu-install doctor --env {_env_prefix()}` for the cause "
                       "(numpy/protobuf pins, missing libraries)")
    measured: Measured = {"tensorflow": tf.__version__, "import_seconds": round(time.monotonic() - t0, 2)}
    state["tf"] = tf
    info = dict(tf.sysconfig.get_build_info())
    build: TfBuild = {"is_cuda_build": info.get("is_cuda_build"), "cuda_version": info.get("cuda_version"),
                      "cudnn_version": info.get("cudnn_version"),
                      "cuda_compute_capabilities": info.get("cuda_compute_capabilities")}
    measured["build"] = build
    if gpu_mode and not build.get("is_cuda_build"):
        return outcome("fail", f"TensorFlow {tf.__version__} is a CPU-only build", measured,
                       hint="install the `tensorflow` package (not tensorflow-cpu): re-run `tfgpu-install`")
    wanted: tuple[tuple[Literal["cuda_version", "cudnn_version"], Optional[str]], ...] = (
        ("cuda_version", plan.get("cuda")), ("cudnn_version", plan.get("cudnn")))
    for key, want in wanted:
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
    details: list[TfGpu] = []
    for g in gpus:
        try:
            cc = tf.config.experimental.get_device_details(g).get("compute_capability")
            details.append({"name": g.name, "compute_capability": ".".join(map(str, cc)) if cc else None})
        except Exception as exc:  # noqa: BLE001  (recorded beside the device: its cc stays unknown)
            details.append({"name": g.name, "compute_capability": None,
                            "details_error": f"{type(exc).__name__}: {exc}"})
    state["tf_gpus"] = details
    if gpu_mode and not gpus and require_gpu_list:
        log = parse_tf_log(tf_log())
        libs = [d.get("library", "") for d in log["dlopen_failures"] if not d.get("harmless")]
        why = f": could not load {', '.join(libs)}" if libs else ""
        return outcome("fail", f"TensorFlow sees no GPU{why}", {**measured, "log": log},
                       hint="the library TF names is missing from its search path: check the env's activation "
                       "(LD_LIBRARY_PATH) or run `tfgpu-install doctor`")
    with Tf32Off(tf) as tf32:  # exact float32 for the comparisons; the user's setting is put back after
        failure = _exact_ops(tf, np, device, measured)
    measured["tf32_restored_to"] = tf32.before
    if failure is not None:
        return failure
    err, cerr = measured["matmul_max_abs_error"], measured["conv2d_max_abs_error"]
    want_kind = _device_kind(device)
    if gpus:
        measured["created_devices"] = parse_tf_log(tf_log())["created_devices"]
    failure = _mirrored(tf, measured)
    if failure is not None:
        return failure
    reduced = measured.get("all_reduce") or {}
    step = (f"; a MirroredStrategy step's all-reduce over {reduced['replicas']} replica(s) is exact"
            if reduced.get("ok") else "")
    return outcome("pass", f"TensorFlow {tf.__version__}: matmul and conv2d on {want_kind} match numpy "
                   f"(max errors {err:.1e}, {cerr:.1e}); {len(gpus)} GPU(s) listed{step}", measured)


def _mirrored(tf: Any, measured: Measured) -> Optional[Outcome]:
    """MirroredStrategy over every GPU TF lists, and one step of it (`all_reduce_step`)."""
    try:
        strategy = tf.distribute.MirroredStrategy()
        measured["mirrored_replicas"] = int(strategy.num_replicas_in_sync)
    except Exception as exc:  # noqa: BLE001  (recorded in the report)
        measured["mirrored_error"] = f"{type(exc).__name__}: {exc}"
        return None
    reduced = all_reduce_step(tf, strategy)
    measured["all_reduce"] = reduced
    if measured["mirrored_replicas"] > 1 and not reduced.get("ok"):
        return outcome("fail", f"MirroredStrategy's all-reduce across {measured['mirrored_replicas']} GPUs "
                       f"failed: {reduced.get('error') or reduced}", measured,
                       hint="the GPUs cannot exchange data (NCCL, peer-to-peer): run with NCCL_DEBUG=INFO; try "
                       "NCCL_P2P_DISABLE=1, and check `nvidia-smi topo -m` and the IOMMU / ACS settings")
    return None


def all_reduce_step(tf: Any, strategy: Any) -> AllReduce:
    """One MirroredStrategy step: every replica contributes (its id + 1) x 1024 and all-reduces (SUM, the
    gradient path: NCCL between GPUs); every replica must get n(n+1)/2 in every element. Before, the
    strategy was made and never run, so NCCL and peer-to-peer failures passed."""
    try:
        n = int(strategy.num_replicas_in_sync)

        def step() -> Any:
            ctx = tf.distribute.get_replica_context()
            mine = tf.fill([1024], tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32))
            return ctx.all_reduce(tf.distribute.ReduceOp.SUM, mine)

        results = strategy.experimental_local_results(strategy.run(tf.function(step)))
        want = n * (n + 1) / 2.0
        got = [float(tf.reduce_max(tf.abs(r - want)).numpy()) for r in results]
        return {"replicas": n, "expected": want, "max_error": max(got) if got else None,
                "ok": bool(got) and len(got) == n and max(got) == 0.0,
                "devices": [str(getattr(r, "device", "")) for r in results]}
    except Exception as exc:  # noqa: BLE001  (recorded; it fails the layer only with several replicas)
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


# ---- layer 6 -------------------------------------------------------------------------------------
def _time_matmul(tf: Any, device: str, n: int, reps: int, dtype: Any = None, per_sync: int = 8) -> float:
    """Seconds per matmul: `per_sync` matmuls queued, then one sync, best of `reps` (sizes that time
    Python round trips otherwise measure the host, not the device)."""
    dtype = dtype or tf.float32
    with tf.device(device):
        a = tf.cast(tf.random.uniform((n, n)), dtype)
        b = tf.cast(tf.random.uniform((n, n)), dtype)
        float(tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)).numpy())  # warm-up: kernels, memory
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            c = a
            for _ in range(per_sync):
                c = tf.matmul(a, b)
            float(tf.reduce_sum(tf.cast(c, tf.float32)).numpy())  # .numpy() waits for the device
            best = min(best, (time.perf_counter() - t) / per_sync)
    return best


def _gpu_cc(tf: Any, device: str) -> Optional[tuple[int, ...]]:
    """The compute capability of the device benchmarked (None on the CPU or when TF does not say)."""
    try:
        gpus = tf.config.list_physical_devices("GPU")
        cc = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") if gpus else None
        return tuple(cc) if cc and "GPU" in device.upper() else None
    except (AttributeError, IndexError, RuntimeError, TypeError, ValueError):  # not timed, never guessed
        return None


def _precisions(tf: Any, device: str) -> list[tuple[str, Any, Optional[bool]]]:
    """(name, dtype, TF32 switch) to time: FP32 exact, TF32, fp16 where the GPU has Tensor Cores for it
    (cc >= 7.0), bf16 where it has them for that (cc >= 8.0)."""
    out: list[tuple[str, Any, Optional[bool]]] = [("fp32", tf.float32, False), ("tf32", tf.float32, True)]
    cc = _gpu_cc(tf, device)
    if cc and cc >= (7, 0):
        out.append(("fp16", tf.float16, None))
    if cc and cc >= (8, 0):
        out.append(("bf16", tf.bfloat16, None))
    return out


# A precision's rate in a benchmark row.
_RATE: dict[str, Literal["fp32_gflops", "tf32_gflops", "fp16_gflops", "bf16_gflops"]] = {
    "fp32": "fp32_gflops", "tf32": "tf32_gflops", "fp16": "fp16_gflops", "bf16": "bf16_gflops"}


def headline(row: BenchRow, tf32_default: Optional[bool], cc: Optional[tuple[int, ...]]) -> Headline:
    """The rate a model gets with TensorFlow's default math: TF32 on Ampere and later (TF's default
    since 2.4, unless the user turned it off), FP32 elsewhere; said which."""
    tf32 = bool(tf32_default) and bool(cc) and cc is not None and cc >= (8, 0)
    if tf32:
        return {"gflops": row["tf32_gflops"], "math": "tf32",
                "why": "TensorFlow's default float32 math on compute capability >= 8.0 is TF32"}
    why = ("TF32 is off in this TensorFlow (tf.config.experimental.enable_tensor_float_32_execution(False))"
           if tf32_default is False else "no TF32 on this device: float32 math is FP32")
    return {"gflops": row["fp32_gflops"], "math": "fp32", "why": why}


def mixed_precision_advice(row: BenchRow, head: Headline) -> MixedPrecisionAdvice:
    """Measured, not guessed: the 16-bit rate over the default math's at the largest size, and the
    Keras policy that gets it (bf16 needs no loss scaling, so it is preferred where the GPU has it)."""
    rates = {k: row.get(_RATE[k]) or 0.0 for k in ("bf16", "fp16")}
    best = max((k for k in ("bf16", "fp16") if rates[k]), key=lambda k: rates[k], default=None)
    if best is None:
        return {"measured": False, "why": "no 16-bit Tensor Core math on this device: not measured"}
    if rates["bf16"] and rates["bf16"] >= 0.9 * rates[best]:
        best = "bf16"
    speedup = round(rates[best] / max(head["gflops"], 1e-9), 2)
    policy = "mixed_bfloat16" if best == "bf16" else "mixed_float16"
    worth = speedup >= 1.3
    return {"measured": True, "n": row["n"], "dtype": best, "speedup_over_default": speedup,
            "default_math": head["math"], "policy": policy, "worth_it": worth,
            "advice": (f"{best} matmuls ran {speedup}x TensorFlow's default math ({head['math']}) at n={row['n']}: "
                       f"tf.keras.mixed_precision.set_global_policy('{policy}')" if worth else
                       f"{best} matmuls ran only {speedup}x the default math ({head['math']}) at n={row['n']}: "
                       "mixed precision would gain little here")}


def benchmark(tf: Any, device: str, sizes: list[int], reps: int = 3) -> Benchmark:
    """GFLOP/s per size for FP32 (TF32 off), TF32, fp16 and bf16 (where the GPU has them), the CPU's
    FP32 beside them; the headline is TensorFlow's default math (`headline`), and the mixed-precision
    advice is measured. The user's TF32 setting is put back afterwards."""
    rows: list[BenchRow] = []
    with Tf32Off(tf) as saved:
        kinds = _precisions(tf, device)
        cc = _gpu_cc(tf, device)
        for n in sizes:
            flop = 2.0 * n ** 3
            cpu = _time_matmul(tf, "/CPU:0", n, reps, per_sync=1)
            row: BenchRow = {"n": n, "cpu_gflops": round(flop / cpu / 1e9, 1)}
            for name, dtype, tf32 in kinds:
                if tf32 is not None:
                    tf.config.experimental.enable_tensor_float_32_execution(tf32)
                row[_RATE[name]] = round(flop / _time_matmul(tf, device, n, reps, dtype) / 1e9, 1)
            head = headline(row, saved.before, cc)
            row["gpu_gflops"] = head["gflops"]  # the headline: TF's default math (was FP32 with TF32 off)
            row["gpu_math"] = head["math"]
            row["speedup"] = round(row["gpu_gflops"] / max(row["cpu_gflops"], 1e-9), 2)
            rows.append(row)
    top: Headline = headline(rows[-1], saved.before, cc) if rows else {}
    return {"device": device, "precision": ", ".join(k for k, _, _ in kinds),
            "headline": {**top, "n": rows[-1]["n"]} if rows else None,
            "mixed_precision": mixed_precision_advice(rows[-1], top) if rows else None,
            "tf32_setting_kept": saved.before, "sizes": rows}


def burn(tf: Any, device: str, seconds: float, n: int = 4096, telemetry: Optional[nvml.Telemetry] = None) -> Burn:
    """Sustained matmuls in TensorFlow for `seconds` with TF's default math, every product compared with
    the first, exactly: the operands are multiples of 1/8 below 4, so every sum is exact in float32 and
    TF32 and any difference is a wrong element. The matmuls run inside one tf.function per batch (a
    graph loop, one host sync per batch, batches grown to ~0.25 s), so the GPU is not waiting on Python;
    each product is scaled by 2^(i mod 2) so no optimiser can hoist it out of the loop. The duty cycle
    is NVML's utilisation while it ran, and the host's share is the time outside the batches."""
    import numpy as np

    with tf.device(device):
        a = tf.cast(tf.random.stateless_uniform((n, n), seed=(1, 2), minval=-30, maxval=31, dtype=tf.int32),
                    tf.float32) / 8.0
        b = tf.cast(tf.random.stateless_uniform((n, n), seed=(3, 4), minval=-30, maxval=31, dtype=tf.int32),
                    tf.float32) / 8.0
        ref = tf.matmul(a, b)

    def batch(count: Any) -> Any:
        def body(i: Any, errs: Any) -> Any:
            scale = tf.pow(2.0, tf.cast(i % 2, tf.float32))
            c = tf.matmul(a * scale, b)
            return i + 1, errs.write(i, tf.reduce_max(tf.abs(c - ref * scale)))
        _, errs = tf.while_loop(lambda i, _: i < count, body, (tf.constant(0), tf.TensorArray(tf.float32, count)))
        return errs.stack()

    batch_of = tf.function(batch)

    iters = mismatches = 0
    worst = 0.0
    count, inside = 2, 0.0
    series: list[list[float]] = []
    if telemetry is None:
        telemetry = nvml.Telemetry()
    with telemetry as tel:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            t0 = time.monotonic()
            with tf.device(device):
                errs = batch_of(tf.constant(count)).numpy()  # .numpy() waits for the batch
            took = time.monotonic() - t0
            inside += took
            iters += count
            mismatches += int(np.sum(errs != 0.0))
            worst = max(worst, float(np.max(errs)))
            rate = round(count * 2.0 * n ** 3 / max(took, 1e-9) / 1e9, 1)
            series.append([round(time.monotonic() - start, 3), rate])
            if took < 0.25 and count < 4096:
                count *= 2
        elapsed = time.monotonic() - start
        tel.load(start, start + elapsed)
    tele = tel.summary()
    util = (tele.get("stats") or {}).get("util_pct")
    return {"kind": "tensorflow-matmul", "seconds": round(elapsed, 1), "n": n, "iterations": iters,
            "products": iters, "mismatches": mismatches, "max_abs_error": worst,
            "compared": "every product, exactly (operands in 1/8ths: exact in float32 and TF32)",
            "gflops": round(iters * 2.0 * n ** 3 / max(elapsed, 1e-9) / 1e9, 1),
            "host_share": round(1.0 - inside / max(elapsed, 1e-9), 4),
            "duty_cycle": round(util["mean"] / 100.0, 3) if util else None,
            "duty_source": "nvml utilisation" if util else None, "series": {"gflops": series},
            "telemetry": tele, "throttled": sorted(r for r in tele.get("throttle_shares") or {} if r != "gpu_idle")}
