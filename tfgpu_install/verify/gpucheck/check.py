"""The layered GPU check, run INSIDE the target environment as a script:

    <env>/bin/python check.py --plan-json '{"cuda": "12.3", "cudnn": "8.9.7.29"}' [--cpu-ok]
        [--benchmark] [--burn SECONDS] [--root /] [--layers hardware,driver] [--keep-going] [--tf-log FILE]

Prints ONE JSON document on stdout (anything else that writes to stdout is sent to stderr);
progress lines ("tfgpu-check: layer N begin") go to stderr so a host that sees a crash knows
the layer in progress. stdlib + ctypes only: the env does not have the `tfgpu_install` package,
so the sibling modules are imported from this file's directory.

The layers, their order and what each needs are tfgpucheck_layers.LAYERS (one table, read by the
host side too). The first failure stops the run; later layers are reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, Callable, Literal, NamedTuple, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# This file runs as a script inside the target env, where `tfgpu_install` is not installed: its
# siblings are imported by file name. mypy reads them as the package's modules.
if TYPE_CHECKING:
    from tfgpu_install.verify.gpucheck import tfgpucheck_arch as arch
    from tfgpu_install.verify.gpucheck import tfgpucheck_cuda as cuda
    from tfgpu_install.verify.gpucheck import tfgpucheck_cudnn as cudnn
    from tfgpu_install.verify.gpucheck import tfgpucheck_health as judge
    from tfgpu_install.verify.gpucheck import tfgpucheck_known as known
    from tfgpu_install.verify.gpucheck import tfgpucheck_layers as layers
    from tfgpu_install.verify.gpucheck import tfgpucheck_nvml as nvml
    from tfgpu_install.verify.gpucheck import tfgpucheck_sgemm as sgemm
    from tfgpu_install.verify.gpucheck import tfgpucheck_tf as tfl
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        CheckPlan,
        DeviceEntry,
        DeviceMap,
        Extras,
        FirstFailure,
        LayerEntry,
        Measured,
        MixedPrecision,
        Outcome,
        PtxJit,
        Report,
        State,
        TfLog,
        VisibleDevices,
    )
else:
    import tfgpucheck_arch as arch
    import tfgpucheck_cuda as cuda
    import tfgpucheck_cudnn as cudnn
    import tfgpucheck_health as judge
    import tfgpucheck_known as known
    import tfgpucheck_layers as layers
    import tfgpucheck_nvml as nvml
    import tfgpucheck_sgemm as sgemm
    import tfgpucheck_tf as tfl  # cheap: numpy and TensorFlow are imported inside its functions

FORMAT = 1


class Fd2Capture:
    """Send fd 2 (where TF's C++ logging writes) to a file for the duration."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.saved = -1

    def __enter__(self) -> "Fd2Capture":
        sys.stderr.flush()
        self.saved = os.dup(2)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
        return self

    def read(self) -> str:
        sys.stderr.flush()
        try:
            with open(self.path, errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)


_PROGRESS_FILE: list[int] = []  # an fd that survives our death: the host reads it after a timeout or crash


def _progress(fd: int, text: str) -> None:
    line = f"tfgpu-check: {text}\n".encode()
    os.write(fd, line)
    for extra in _PROGRESS_FILE:
        os.write(extra, line)


def _mixed_precision(ccs: list[str]) -> MixedPrecision:
    """Mixed precision pays only where every GPU has Tensor Cores (compute capability >= 7.0)."""
    ok = all(tuple(int(x) for x in c.split(".")) >= (7, 0) for c in ccs)
    return {"eligible": ok, "compute_capabilities": ccs,
            "why": "compute capability >= 7.0 has Tensor Cores (float16 fast)" if ok
            else "a GPU below compute capability 7.0 has no Tensor Cores: mixed precision "
            "would be slower"}


def _visible_devices(state: State, hw: Outcome, environ: dict[str, str]) -> VisibleDevices:
    """Which nvidia-smi GPU each CUDA device is: NVML's UUIDs / bus ids (never positions in /sys)."""
    nv = state.get("nvml") or {}
    mapping: list[DeviceMap] = []
    for d in state.get("devices", []):
        gpu, how = nvml.match(d, nv.get("devices", []))
        uuid = (("MIG-" if how == "mig-uuid" else "GPU-") + d["uuid"]) if d.get("uuid") else None
        mapping.append({"cuda": d["index"], "nvidia_smi": gpu["nvidia_smi"] if gpu else None, "pci": d.get("pci"),
                        "uuid": uuid, "matched_by": how or None, "name": d["name"]})
    vis: VisibleDevices = {"CUDA_VISIBLE_DEVICES": environ.get("CUDA_VISIBLE_DEVICES"),
                           "CUDA_DEVICE_ORDER": environ.get("CUDA_DEVICE_ORDER"), "mapping": mapping}
    nvml_error = nv.get("error")
    if nvml_error:
        vis["nvml_error"] = nvml_error + (" (expected: a Jetson has no NVML)" if hw["measured"].get("tegra") else "")
    gpu_errors = [e for e in (d.get("error") for d in nv.get("devices", [])) if e]
    if gpu_errors:  # one GPU NVML cannot open does not lose the others
        vis["nvml_gpu_errors"] = gpu_errors
    note = nvml.order_note(mapping, environ)
    if note:
        vis["note"] = note
    return vis


def _ptx_jit(ccs: list[str], archs: list[str]) -> PtxJit:
    """The resolver's rule (tfgpucheck_arch): a GPU with no SASS it can run gets PTX, JIT-compiled on first use."""
    sass, ptx = arch.split_archs(archs)
    seen = {c: arch.coverage(c, sass, ptx) for c in ccs}
    described = {c: (f"sass sm_{(a or '').replace('.', '')}" if how == "sass" else
                     f"ptx compute_{(a or '').replace('.', '')}" if how == "ptx" else "none")
                 for c, (how, a) in seen.items()}
    jit = sorted({c for c, (how, _) in seen.items() if how == "ptx"}, key=arch.cc_key)
    none = sorted({c for c, (how, _) in seen.items() if how == "none"}, key=arch.cc_key)
    note = "first run JIT-compiles kernels for minutes (cached afterwards)" if jit else ""
    if none:
        note = (note + "; " if note else "") + f"no kernels at all for cc {', '.join(none)} in this build"
    return {"compute_capabilities": jit, "no_kernels": none, "coverage": described,
            "build_archs": archs, "note": note}


def extras(state: State, hw: Outcome, environ: dict[str, str]) -> Extras:
    """Mixed-precision eligibility, CUDA vs nvidia-smi numbering, MirroredStrategy coverage."""
    out: Extras = {}
    ccs = [c for c in (d.get("compute_capability") for d in state.get("devices") or state.get("tf_gpus") or []) if c]
    if ccs:
        out["mixed_precision"] = mp = _mixed_precision(ccs)
        bench = (state.get("bench_measured") or {}).get("benchmark")
        advice = (bench["mixed_precision"] if bench else None) or {}
        if advice.get("measured"):
            mp.update({"measured": advice, "policy": advice["policy"] if advice["worth_it"] else None,
                       "why": advice["advice"]})
    out["visible_devices"] = _visible_devices(state, hw, environ)
    tf_layer: Measured = state.get("tf_measured", {})
    archs = (tf_layer.get("build") or {}).get("cuda_compute_capabilities") or []
    if ccs and archs:
        out["ptx_jit"] = _ptx_jit(ccs, archs)
    if "mirrored_replicas" in tf_layer:
        gpus = len(tf_layer.get("gpus", []))
        out["mirrored_strategy"] = {"replicas": tf_layer["mirrored_replicas"], "gpus": gpus,
                                    "sees_all": tf_layer["mirrored_replicas"] == max(gpus, 1)}
    return out


def known_tf_failure(text: str, state: State, plan: CheckPlan) -> Optional[str]:
    """The architecture ceiling (TensorFlow <= 2.21 on Blackwell, cc >= 10.0) when its failure shows:
    CUDA_ERROR_INVALID_PTX or "PTX version ... does not support target" (tfgpucheck_known)."""
    if not known.ptx_failure_seen(text):
        return None
    ccs = [c for c in (d.get("compute_capability") for d in state.get("devices") or state.get("tf_gpus") or []) if c]
    version = getattr(state.get("tf"), "__version__", None) or (state.get("tf_measured") or {}).get("tensorflow") \
        or plan.get("tensorflow")
    hits = known.ceiling_hits(str(version) if version else None, ccs, plan)
    return known.failure_words(hits[0], str(version)) if hits else None


class Seam(NamedTuple):
    """What only a Python caller can change (tests/support/check_on_cpu.py runs the GPU path's
    machinery on the CPU this way): never read from the environment or the command line."""

    device: str = ""  # pin the TensorFlow layers to this device (e.g. /CPU:0)
    require_gpu_list: bool = True  # the TensorFlow layer fails when TF lists no GPU


def driver_layer(plan: CheckPlan, state: State) -> Outcome:
    """libcuda's view (tfgpucheck_cuda.layer_driver), then NVML's of each of its GPUs: limits, the
    processes on it, and the health counters, which fail the layer when a GPU needs a reset or its
    memory reports uncorrectable errors (a card in that state passed every other layer)."""
    res = cuda.layer_driver(plan, state)
    if res["status"] != "pass" or not state.get("devices"):
        return res
    facts = nvml.gpu_facts(state["devices"])
    state["nvml_facts"] = facts
    state["read_health"] = nvml.gpu_facts
    res["measured"]["nvml"] = facts
    if facts.get("error"):
        res["summary"] += f"; health counters unknown (NVML: {facts.get('error')})"
        return res
    sick = []
    for g in facts.get("gpus", []):
        verdict = judge.judge_health(g.get("health") or ({"error": g["error"]} if g.get("error") else None))
        g["verdict"] = verdict
        if verdict["state"] in ("needs_reset", "failing"):
            sick.append((g, verdict))
    if sick:
        worst = "failing" if any(v["state"] == "failing" for _, v in sick) else "needs_reset"
        text = "; ".join(f"GPU {g['cuda']} (nvidia-smi {g['nvidia_smi']}): {', '.join(v['problems'])}" for g, v in sick)
        return cuda.outcome("fail", f"{res['summary']}; {text}", res["measured"],
                            hint=judge.HEALTH_HINT[worst].replace("-i N", f"-i {sick[0][0]['nvidia_smi']}"))
    known = [g for g in facts.get("gpus", []) if (g.get("verdict") or {}).get("state") == "ok"]
    res["summary"] += (f"; health counters ok on {len(known)} of {len(facts.get('gpus', []))} GPU(s)" if known
                       else "; health counters unknown")
    return res


def _tf_bench(args: argparse.Namespace, tf: Any, device: str, target: Optional[DeviceEntry],
              measured: Measured, key: Literal["burn", "tf_burn"]) -> tuple[list[str], Optional[Outcome]]:
    """The TensorFlow benchmark and burn into `measured` (the TF burn under `key`): (summary parts,
    failure)."""
    parts = []
    if args.benchmark:
        sizes = [int(s) for s in args.bench_sizes.split(",")]
        measured["benchmark"] = bench = tfl.benchmark(tf, device, sizes)
        top, advice = bench["sizes"][-1], bench.get("mixed_precision") or {}
        parts.append(f"matmul {top['n']}: {top['gpu_gflops']} GFLOP/s on {device} with TensorFlow's default math "
                     f"({top['gpu_math']}), {top['speedup']}x the CPU"
                     + (f"; {advice['advice']}" if advice.get("advice") else ""))
    if args.burn:
        b = tfl.burn(tf, device, float(args.burn), n=args.burn_size,
                     telemetry=nvml.Telemetry(target, interval=args.sample_interval))
        measured[key] = b
        parts.append(f"TensorFlow burn {b['seconds']}s: {b['iterations']} matmuls, {b['mismatches']} wrong results"
                     + (f", throttled ({', '.join(b['throttled'])})" if b["throttled"] else ""))
        if b["mismatches"]:
            return parts, cuda.outcome("fail", "; ".join(parts), measured,
                                       hint="the GPU computed wrong results under load: check `nvidia-smi -q` for "
                                       "ECC/Xid errors, cooling and power; do not trust this card for training")
    return parts, None


def _bench_layer(args: argparse.Namespace, state: State, device: str, gpu_mode: bool) -> Outcome:
    """The SGEMM burn on every GPU (--sgemm-burn: cuBLAS only, runs without TensorFlow), then
    TensorFlow's benchmark and burn (--benchmark, --burn) on `device`."""
    devices = state.get("devices")
    target = devices[0] if devices else None  # CUDA device 0 = TF's /GPU:0: sample that one
    measured: Measured = {}
    parts: list[str] = []
    hint = None
    if args.sgemm_burn:
        targets = list(state.get("devices") or []) or None
        res = sgemm.sgemm_burn(state, float(args.sgemm_burn), args.sgemm_burn_size,
                               nvml.Telemetry(targets, interval=args.sample_interval), share=args.sgemm_burn_share)
        if res["status"] != "pass" or not (args.benchmark or args.burn):
            return res
        measured.update(res["measured"])
        parts.append(res["summary"])
        hint = res["hint"]
    if args.benchmark or args.burn:
        tf = state.get("tf")
        if tf is None or not gpu_mode:
            why = ("needs TensorFlow (the tensorflow layer)" if tf is None else
                   "CPU-only env: no GPU to benchmark or burn")
            if not parts:
                return cuda.outcome("skip", why)
            parts.append(f"TensorFlow's benchmark and burn not run: {why}")
        else:
            more, failure = _tf_bench(args, tf, device, target, measured, "tf_burn" if args.sgemm_burn else "burn")
            if failure is not None:
                return failure
            parts += more
            tf_burn = measured.get("tf_burn") or (measured.get("burn") if not args.sgemm_burn else None) or {}
            if tf_burn.get("throttled") and hint is None:  # a working GPU (laptops throttle by design): flagged
                hint = ("the GPU slowed itself down under load: check cooling and power "
                        "(`nvidia-smi -q -d PERFORMANCE,TEMPERATURE`)")
    return cuda.outcome("pass", "; ".join(parts), measured, hint=hint)


def implementations(args: argparse.Namespace, plan: CheckPlan, state: State, device: str,
                    gpu_mode: bool, seam: Seam, capture: Fd2Capture,
                    hw_probe: Outcome) -> dict[str, Callable[[], Outcome]]:
    """Each layer of the table (tfgpucheck_layers.LAYERS), by name."""

    def tf_layer() -> Outcome:
        try:
            res = tfl.layer_tensorflow(plan, device, gpu_mode, capture.read, state,
                                       require_gpu_list=seam.require_gpu_list)
        except Exception as exc:  # noqa: BLE001  (recorded: named below when it is a known failure)
            res = cuda.outcome("fail", f"TensorFlow raised {type(exc).__name__}: {str(exc)[:300]}",
                               hint="read TensorFlow's captured log in this report, or run `tfgpu-install doctor`")
        state["tf_measured"] = res["measured"]
        if res["status"] == "fail":
            named = known_tf_failure(res["summary"] + "\n" + capture.read(), state, plan)
            if named:
                res["hint"] = named
        return res

    return {
        "hardware": lambda: hw_probe,
        "driver": lambda: driver_layer(plan, state),
        "cuda-runtime": lambda: cuda.layer_runtime(plan, state),
        "cudnn": lambda: cudnn.layer_cudnn(plan, state),
        "cublas": lambda: sgemm.layer_cublas(plan, state, args.sgemm_size),
        "tensorflow": tf_layer,
        "benchmark": lambda: _kept(state, _bench_layer(args, state, device, gpu_mode)),
    }


def _kept(state: State, res: Outcome) -> Outcome:
    """The benchmark layer's outcome, its measurements kept for the extras (the mixed-precision advice)."""
    state["bench_measured"] = res.get("measured") or {}
    return res


def _wanted(args: argparse.Namespace) -> set[str]:
    wanted = layers.parse_selection(args.layers) if args.layers else set(layers.default_layers())
    if args.benchmark or args.burn or args.sgemm_burn:
        wanted.add("benchmark")
    return wanted


def _run_one(lay: layers.Layer, fn: Callable[[], Outcome], capture: Fd2Capture) -> Outcome:
    try:
        if lay.needs == "tensorflow" or lay.needs == "opt-in":
            with capture:
                return fn()
        return fn()
    except Exception as exc:  # noqa: BLE001  (recorded: a misbehaving library must still give a report)
        if lay.needs != "tensorflow":
            return cuda.outcome("fail", f"check error in the {lay.name} layer: {type(exc).__name__}: {exc}")
        return cuda.outcome("fail", f"TensorFlow raised {type(exc).__name__}: {str(exc)[:300]}",
                            hint="read TensorFlow's captured log in this report, or run `tfgpu-install doctor`")


def run_layers(args: argparse.Namespace, impl: dict[str, Callable[[], Outcome]], gpu_mode: bool,
               hw_probe: Outcome, capture: Fd2Capture, progress_fd: int) -> list[LayerEntry]:
    wanted = _wanted(args)
    results: list[LayerEntry] = []
    stopped: Optional[str] = None
    for lay in layers.LAYERS:
        if lay.name not in wanted:
            continue
        num = layers.number(lay.name)
        entry: LayerEntry
        if stopped is not None:
            entry = _entry(num, lay.name, cuda.outcome("skip", f"not run: layer {layers.number(stopped)} "
                                                       f"({stopped}) failed"))
        elif not gpu_mode and lay.needs == "gpu":
            first = lay.name == layers.NAMES[0]
            gpu_note = "; " + hw_probe["summary"] if first else ""
            entry = _entry(num, lay.name, cuda.outcome("skip", f"CPU-only env (--allow-cpu): GPU layer not "
                                                       f"checked{gpu_note}", hw_probe["measured"] if first else None))
        else:
            _progress(progress_fd, f"layer {num} begin")
            t0 = time.monotonic()
            entry = _entry(num, lay.name, _run_one(lay, impl[lay.name], capture))
            entry["seconds"] = round(time.monotonic() - t0, 3)
            _progress(progress_fd, f"layer {num} {entry['status']}")
            if entry["status"] == "fail" and not args.keep_going:
                stopped = lay.name
        results.append(entry)
    return results


NO_SEAM = Seam()


def run(args: argparse.Namespace, out_fd: int, progress_fd: int, seam: Seam = NO_SEAM) -> Report:
    started = time.monotonic()
    given: dict[str, Any] = json.loads(args.plan_json or "{}")  # JSON edge: the host's plan, echoed as given
    plan: CheckPlan = read_plan(given)
    gpu_mode = not args.cpu_ok
    device = seam.device or ("/GPU:0" if gpu_mode else "/CPU:0")
    state: State = {"plan": plan}
    own_dir = "" if args.tf_log else tempfile.mkdtemp(prefix="tfgpu-check-")
    tf_log_path = args.tf_log or os.path.join(own_dir, "tf.log")
    capture = Fd2Capture(tf_log_path)
    hw_probe = cuda.layer_hardware(args.root)
    impl = implementations(args, plan, state, device, gpu_mode, seam, capture, hw_probe)
    results = run_layers(args, impl, gpu_mode, hw_probe, capture, progress_fd)
    if state.get("devices"):
        state["nvml"] = nvml.inventory()
    failed = [r for r in results if r["status"] == "fail"]
    log_text = capture.read()
    tf_log: TfLog = {"path": tf_log_path, "tail": log_text.splitlines()[-40:]}
    if log_text:
        read = tfl.parse_tf_log(log_text)
        tf_log.update({"dlopen_failures": read["dlopen_failures"], "created_devices": read["created_devices"],
                       "notes": read["notes"], "cudnn_loaded": read["cudnn_loaded"]})
    if own_dir:  # a run by hand: the log is in the report, leave nothing behind
        import shutil

        shutil.rmtree(own_dir, ignore_errors=True)
        tf_log["path"] = None
    tf_passed = any(r["name"] == "tensorflow" and r["status"] == "pass" for r in results)
    return {
        "format": FORMAT,
        "ok": not failed,
        "mode": "gpu" if gpu_mode else "cpu",
        "gpu_verified": gpu_mode and not failed and tf_passed and not seam.device,
        "device": device,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "plan": {k: v for k, v in given.items() if k != "kernels"},  # the rows are the knowledge's, not news
        "layers": results,
        "first_failure": _first_failure(failed[0]) if failed else None,
        "extras": extras(state, hw_probe, dict(os.environ)),
        "tf_log": tf_log,
        "elapsed_seconds": round(time.monotonic() - started, 2),
    }


def read_plan(given: object) -> CheckPlan:
    """The host's plan (verify/host.py CheckPlan.to_json and its knowledge rows), typed: a key whose
    value has another shape is left out (each layer then reads it as not given)."""
    plan: CheckPlan = {}
    if not isinstance(given, dict):
        return plan
    versions: tuple[Literal["cuda", "cudnn", "tensorflow"], ...] = ("cuda", "cudnn", "tensorflow")
    for key in versions:
        value = given.get(key)
        if value is None or isinstance(value, str):
            plan[key] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):  # 12.3 typed by hand
            plan[key] = str(value)
    dirs: tuple[Literal["lib_dirs", "site_dirs"], ...] = ("lib_dirs", "site_dirs")
    for key_ in dirs:
        if isinstance(given.get(key_), list):
            plan[key_] = [str(d) for d in given[key_]]
    if isinstance(given.get("libcuda"), str):
        plan["libcuda"] = given["libcuda"]
    if isinstance(given.get("cpu_only"), bool):
        plan["cpu_only"] = given["cpu_only"]
    if isinstance(given.get("kernels"), dict):
        plan["kernels"] = given["kernels"]  # each row is taken only when it has the shape (tfgpucheck_known.rows)
    return plan


def _entry(num: int, name: str, res: Outcome) -> LayerEntry:
    """A layer as the report lists it: its number and name, then its outcome's keys in their order."""
    return {"layer": num, "name": name, "status": res["status"], "summary": res["summary"],
            "measured": res["measured"], "error": res["error"], "hint": res["hint"]}


def _first_failure(entry: LayerEntry) -> FirstFailure:
    return {"layer": entry.get("layer"), "name": entry.get("name"), "summary": entry.get("summary"),
            "hint": entry.get("hint"), "error": entry.get("error")}


def main(argv: list[str] | None = None, seam: Seam = NO_SEAM) -> int:
    p = argparse.ArgumentParser(description="tfgpu-install's layered GPU check (runs inside the env)")
    p.add_argument("--plan-json", default="{}", help="what the plan placed: cuda, cudnn, tensorflow, lib_dirs")
    p.add_argument("--root", default="/", help="system root prefix (tests plant a /sys tree)")
    p.add_argument("--cpu-ok", action="store_true", help="CPU-only env: skip the GPU layers, TF on /CPU:0")
    p.add_argument("--layers", default="", help="comma-separated layer names to run (default: "
                   + ",".join(layers.default_layers()) + ")")
    p.add_argument("--keep-going", action="store_true", help="run every layer even after a failure")
    p.add_argument("--benchmark", action="store_true")
    p.add_argument("--bench-sizes", default="512,1024,2048,4096")
    p.add_argument("--burn", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--burn-size", type=int, default=4096)
    p.add_argument("--sgemm-size", type=int, default=64)
    p.add_argument("--sgemm-burn", type=float, default=0.0, metavar="SECONDS",
                   help="the benchmark layer without TensorFlow: cuBLAS SGEMMs for SECONDS while NVML samples the GPU")
    p.add_argument("--sgemm-burn-size", type=int, default=0,
                   help="n of the burn's n x n products (default: 8192, smaller where the GPU's memory is small)")
    p.add_argument("--sgemm-burn-share", type=float, default=0.8,
                   help="the share of each GPU's free memory the burn's output buffers may take")
    p.add_argument("--sample-interval", type=float, default=0.5, metavar="SECONDS", help="NVML sampling period")
    p.add_argument("--tf-log", default="", help="file that receives TF's stderr log")
    p.add_argument("--progress-file", default="", help="also append progress lines to this file")
    args = p.parse_args(argv)
    if args.progress_file:
        _PROGRESS_FILE.append(os.open(args.progress_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    # One JSON document on the real stdout; strays (library banners) go to stderr.
    out_fd = os.dup(1)
    progress_fd = os.dup(2)
    sys.stdout.flush()
    os.dup2(2, 1)
    report = run(args, out_fd, progress_fd, seam)
    os.write(out_fd, (json.dumps(report, default=str) + "\n").encode())
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
