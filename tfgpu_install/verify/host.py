"""Host side of the layered GPU check: run gpucheck/check.py inside the target env, read its report.

The check runs as `<env>/bin/python <tfgpu_install>/verify/gpucheck/check.py --plan-json ...` through
ctx.runner, with the env's activation applied (through its `tfgpu-run` launcher when the
install wrote one, else LD_LIBRARY_PATH built here), under a timeout, so a hung driver cannot
hang us. It prints one JSON document; `parse_check_output` turns it (or a crash) into a
VerifyReport. Records of successful runs live under the env's state dir, keyed by a
fingerprint of everything the check looked at.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional, Sequence, TypedDict, cast

from tfgpu_install.context import Context
from tfgpu_install.env.layout import dist_info_dirs, nvidia_lib_dirs
from tfgpu_install.env.verification import RecordedPlan
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.report import Block, Bullets, Text, table
from tfgpu_install.runner import TIMED_OUT, Completed
from tfgpu_install.verify.gpucheck import tfgpucheck_layers as check_layers

if TYPE_CHECKING:
    from tfgpu_install.verify.gpucheck.tfgpucheck_health import SeriesKey
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import ErrorCode, Extras, KernelRows, Measured, TfLog

CHECK_SCRIPT = Path(__file__).resolve().parent / "gpucheck" / "check.py"
LAYER_NAMES = check_layers.NAMES  # the one table (gpucheck/tfgpucheck_layers.py), in order
BASE_TIMEOUT = 300.0  # first TF import on a cold disk, plus PTX JIT on a new GPU, can take minutes
_PROGRESS = re.compile(r"^tfgpu-check: layer (\d+) (begin|pass|fail|skip)$", re.M)


@dataclass(frozen=True)
class CheckPlan:
    """What the check compares against: what the plan placed."""

    cuda: Optional[str] = None  # "12.3"
    cudnn: Optional[str] = None  # "8.9.7.29" (a pin) or "8.9"
    tensorflow: Optional[str] = None
    lib_dirs: tuple[str, ...] = ()  # placed library dirs (cuDNN from redist/archive), searched first
    cpu_only: bool = False  # an --allow-cpu env: layers 0-4 skipped, TF checked on the CPU

    def to_json(self) -> dict[str, object]:
        return {"cuda": self.cuda, "cudnn": self.cudnn, "tensorflow": self.tensorflow,
                "lib_dirs": list(self.lib_dirs), "cpu_only": self.cpu_only}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CheckPlan":
        return cls(cuda=data.get("cuda"), cudnn=data.get("cudnn"), tensorflow=data.get("tensorflow"),
                   lib_dirs=tuple(data.get("lib_dirs") or ()), cpu_only=bool(data.get("cpu_only")))

    @classmethod
    def from_record(cls, plan: "RecordedPlan") -> "CheckPlan":
        """The plan a verification record kept (env/verification.py types it where it reads it)."""
        return cls(cuda=plan.cuda, cudnn=plan.cudnn, tensorflow=plan.tensorflow, lib_dirs=plan.lib_dirs,
                   cpu_only=plan.cpu_only)

    @classmethod
    def from_choice(cls, choice: Any, lib_dirs: Sequence[str] = (), cpu_only: bool = False,
                    cudnn: Optional[str] = None) -> "CheckPlan":
        """From a resolver Choice: the exact cuDNN pin beats the major.minor. Pass `cudnn` (and its
        dir in lib_dirs) when the cuDNN step placed another version from a redist or archive."""
        pins = dict(getattr(choice, "pins", {}) or {})
        cudnn = cudnn or next((v for k, v in pins.items() if k.startswith("nvidia-cudnn-")), None) or choice.cudnn
        return cls(cuda=choice.cuda, cudnn=cudnn, tensorflow=choice.tensorflow, lib_dirs=tuple(lib_dirs),
                   cpu_only=cpu_only)


class CheckRun(TypedDict, total=False):
    argv: list[str]
    returncode: int


@dataclass(frozen=True)
class LayerResult:
    layer: int
    name: str
    status: str  # "pass" | "fail" | "skip"
    summary: str
    measured: "Measured" = field(default_factory=lambda: cast("Measured", {}))
    error: Optional["ErrorCode"] = None  # {"code": 35, "name": "cudaErrorInsufficientDriver"}
    hint: Optional[str] = None
    seconds: Optional[float] = None


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    mode: str  # "gpu" | "cpu"
    gpu_verified: bool
    layers: tuple[LayerResult, ...]
    extras: "Extras" = field(default_factory=lambda: cast("Extras", {}))
    tf_log: "TfLog" = field(default_factory=lambda: cast("TfLog", {}))
    env: str = ""
    when: str = ""
    crashed: Optional[str] = None  # the check died without a report (signal, timeout)
    raw: CheckRun = field(default_factory=lambda: CheckRun())  # how this run started the check (not in the JSON)

    @property
    def first_failure(self) -> Optional[LayerResult]:
        return next((lay for lay in self.layers if lay.status == "fail"), None)

    def layer(self, name: str) -> Optional[LayerResult]:
        """A layer by its name in the table (gpucheck/tfgpucheck_layers.py)."""
        return next((lay for lay in self.layers if lay.name == name), None)

    def summary(self) -> str:
        bad = self.first_failure
        if bad is not None:
            return f"layer {bad.layer} ({bad.name}) failed: {bad.summary}"
        passed = [lay for lay in self.layers if lay.status == "pass"]
        if self.mode == "host":
            return f"host check: {len(passed)} layer(s) passed (no env: TensorFlow not checked)"
        where = "on the GPU" if self.gpu_verified else "on the CPU only"
        return f"verified {where}: {len(passed)} layer(s) passed"

    def to_json(self) -> dict[str, object]:
        from dataclasses import asdict

        return {"ok": self.ok, "mode": self.mode, "gpu_verified": self.gpu_verified, "env": self.env,
                "when": self.when, "summary": self.summary(), "crashed": self.crashed,
                "layers": [asdict(lay) for lay in self.layers], "extras": self.extras, "tf_log": self.tf_log}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "VerifyReport":
        """The check's report (its JSON, or a record of it): the top and each layer's fields read here; the
        measurements, extras and log as the check typed them (gpucheck/tfgpucheck_report.py, held to its
        real reports by tests/verify/test_report_types.py)."""
        return cls(ok=bool(data.get("ok")), mode=str(data.get("mode", "gpu")),
                   gpu_verified=bool(data.get("gpu_verified")),
                   layers=tuple(_layer(d) for d in data.get("layers", [])),
                   extras=cast("Extras", dict(data.get("extras") or {})),
                   tf_log=cast("TfLog", dict(data.get("tf_log") or {})), env=str(data.get("env", "")),
                   when=str(data.get("when", "")), crashed=data.get("crashed"))


def _layer(d: Mapping[str, Any]) -> LayerResult:
    by_num = check_layers.by_number(int(d["layer"]))
    return LayerResult(layer=int(d["layer"]), name=str(d.get("name") or (by_num.name if by_num else d["layer"])),
                       status=str(d["status"]), summary=str(d.get("summary", "")),
                       measured=cast("Measured", dict(d.get("measured") or {})), error=d.get("error"),
                       hint=d.get("hint"), seconds=d.get("seconds"))


# ---- reading the check's output (pure) ---------------------------------------------------------
def parse_check_output(done: Completed, timeout: Optional[float] = None, tf_log_text: str = "",
                       progress_text: str = "") -> VerifyReport:
    """The check's JSON, or a report of how it died (the layer in progress from its progress lines,
    written to stderr and to a progress file that outlives a killed check)."""
    for line in reversed(done.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                break
            if isinstance(data, dict) and "layers" in data:
                return VerifyReport.from_json(data)
            break
    progress = _PROGRESS.findall(progress_text or done.stderr)
    current = int(progress[-1][0]) if progress and progress[-1][1] == "begin" else None
    if done.returncode == TIMED_OUT:
        how = f"timed out after {timeout:g}s" if timeout else "timed out"
    elif done.returncode < 0:
        import signal

        try:
            how = f"crashed ({signal.Signals(-done.returncode).name})"
        except ValueError:
            how = f"died on signal {-done.returncode}"
    else:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        how = f"exited {done.returncode} without a report: {tail}"
    layers = _layers_of_a_dead_check(progress, current, how)
    log_tail = tf_log_text.splitlines()[-40:]
    return VerifyReport(ok=False, mode="gpu", gpu_verified=False, layers=tuple(layers),
                        tf_log={"tail": log_tail} if log_tail else {}, crashed=how)


def _layers_of_a_dead_check(progress: list[tuple[str, str]], current: Optional[int], how: str) -> list[LayerResult]:
    """Each default layer (and the opt-in ones that began) as the progress lines left it."""
    begun = {int(n) for n, st in progress if st == "begin"}
    ran = {int(n): st for n, st in progress if st != "begin"}
    layers = []
    for spec in check_layers.LAYERS:
        num = check_layers.number(spec.name)
        if not spec.default and num not in begun:
            continue
        if num in ran:
            layers.append(LayerResult(num, spec.name, ran[num], "passed before the check died"
                                      if ran[num] == "pass" else f"{ran[num]} before the check died"))
        elif num == current:
            layers.append(LayerResult(num, spec.name, "fail", f"the check {how} in this layer", hint=spec.hint))
        else:
            layers.append(LayerResult(num, spec.name, "skip", "not run"))
    if current is None and not any(lay.status == "fail" for lay in layers):
        first = check_layers.LAYERS[0]
        layers[0] = LayerResult(0, first.name, "fail", f"the check {how}",
                                hint="run the check by hand: <env>/bin/python " + str(CHECK_SCRIPT))
    return layers


# ---- running it ----------------------------------------------------------------------------------
@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the check runs, SIGTERM (a stage timeout, `kill`) ends us the way Ctrl-C does: the
    runner then ends the check's own process group (it runs in a session of its own, so a signal
    to us alone would leave it on the GPU)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def env_python(env: Path) -> Path:
    py = Path(env) / "bin" / "python"
    if not py.exists():
        raise EnvironmentProblem(f"{env} has no bin/python: it is not a Python environment",
                                 hint="pass --env PATH of an env made by `tfgpu-install`, or install one first",
                                 ref="env-not-found")
    return py


def placed_lib_dirs(env: Path) -> list[str]:
    """cuDNN placed from a redist/archive (the cuDNN step's <env>/lib/cudnn-<version>/[lib])."""
    out = []
    for d in sorted(Path(env).glob("lib/cudnn-*")):
        for cand in (d / "lib", d / "lib64", d):
            if cand.is_dir() and any(cand.glob("libcudnn*.so*")):
                out.append(str(cand))
                break
    return out


def activation_env(ctx: Context, env: Path, plan: CheckPlan) -> dict[str, str]:
    """The variables the env's activation sets: its nvidia/*/lib dirs and placed cuDNN first."""
    dirs = list(plan.lib_dirs) + placed_lib_dirs(env)
    dirs += [str(p) for p in nvidia_lib_dirs(env)]
    inherited = ctx.environ.get("LD_LIBRARY_PATH", "")
    out = dict(ctx.environ)
    out["LD_LIBRARY_PATH"] = os.pathsep.join([d for d in dirs] + ([inherited] if inherited else []))
    out["PATH"] = os.pathsep.join([str(Path(env) / "bin"), ctx.environ.get("PATH", "")])
    out["VIRTUAL_ENV"] = str(env)
    out.pop("PYTHONHOME", None)
    return out


def kernel_rows(ctx: Context) -> Optional["KernelRows"]:
    """profiles/kernels.yaml's rows as plain data for the check (it runs without the tool's package and
    names a known failure in the knowledge's own words); None when they cannot be read (the check then
    uses its own copy, tfgpucheck_known)."""
    from dataclasses import asdict

    from tfgpu_install.errors import TfgpuError
    from tfgpu_install.knowledge.load import load_kernels

    try:
        floors, failures = load_kernels(ctx.profiles_dir)
    except (TfgpuError, OSError):
        return None
    keep = ("library", "since", "min_cc", "last", "source", "id", "tensorflow", "cc_min", "cc_max", "text",
            "sources", "runs_instead", "unless_sass", "inferred")
    return cast("KernelRows", {
        "floors": [{k: v for k, v in asdict(r).items() if k in keep} for r in floors],
        "known_failures": [{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(r).items() if k in keep}
                           for r in failures]})


def check_argv(ctx: Context, env: Path, plan: CheckPlan, *, benchmark: bool = False, burn: float = 0,
               extra: Sequence[str] = ()) -> list[str]:
    payload = plan.to_json()
    payload["lib_dirs"] = list(plan.lib_dirs) + placed_lib_dirs(env)
    rows = kernel_rows(ctx)
    if rows is not None:
        payload["kernels"] = rows
    argv = [str(env_python(env)), str(CHECK_SCRIPT), "--plan-json", json.dumps(payload), "--root", str(ctx.root)]
    if plan.cpu_only:
        argv.append("--cpu-ok")
    if benchmark:
        argv.append("--benchmark")
    if burn:  # every GPU under the SGEMM burn (the health report's), then TensorFlow's own burn, shorter
        argv += ["--sgemm-burn", f"{burn:g}", "--burn", f"{tf_burn_seconds(burn):g}"]
    argv += list(extra)
    launcher = Path(env) / "bin" / "tfgpu-run"
    if launcher.is_file() and os.access(launcher, os.X_OK):
        argv = [str(launcher)] + argv  # the env's own activation, exactly as users get it
    return argv


def tf_burn_seconds(burn: float) -> float:
    """TensorFlow's burn after the SGEMM burn: a quarter of it, 10 to 30 s (the health verdict is the
    SGEMM burn's; this one shows TensorFlow itself stays right under sustained load)."""
    return min(max(burn / 4, 10.0), 30.0, burn)


def run_verification(ctx: Context, env: Path, plan: CheckPlan, *, benchmark: bool = False, burn: float = 0,
                     timeout: Optional[float] = None, extra: Sequence[str] = ()) -> VerifyReport:
    env = Path(env)
    if timeout is None:
        timeout = BASE_TIMEOUT + (180 if benchmark else 0) + (burn + tf_burn_seconds(burn)) * 1.5 if burn else \
            BASE_TIMEOUT + (180 if benchmark else 0)
    with tempfile.TemporaryDirectory(prefix="tfgpu-verify-") as tmp:
        log, prog = Path(tmp) / "tf.log", Path(tmp) / "progress"
        argv = check_argv(ctx, env, plan, benchmark=benchmark, burn=burn,
                          extra=list(extra) + ["--tf-log", str(log), "--progress-file", str(prog)])
        # The env's launcher applies its own activation; without one, we build the same variables.
        run_env = dict(ctx.environ) if argv[0].endswith("tfgpu-run") else activation_env(ctx, env, plan)
        # Importing TF makes Keras write ~/.keras/keras.json: keep that in our cache, not the
        # user's home (an install touches nothing the user did not ask for).
        run_env.setdefault("KERAS_HOME", str(ctx.cache_dir / "keras"))
        with sigterm_as_interrupt():
            done = ctx.runner.run(argv, desc="GPU check inside the env", env=run_env, timeout=timeout)
        log_text = log.read_text(errors="replace") if log.is_file() else ""
        prog_text = prog.read_text(errors="replace") if prog.is_file() else ""
    report = parse_check_output(done, timeout, log_text, prog_text)
    from dataclasses import replace

    return replace(report, env=str(env), when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   raw={"argv": list(done.argv), "returncode": done.returncode})


# ---- records -------------------------------------------------------------------------------------
def verify_fingerprint(ctx: Context, env: Path, plan: CheckPlan) -> str:
    """The env's fingerprint (packages, activation, library files) plus the driver and the plan:
    a driver upgrade or a new plan means the old verification no longer vouches for the env."""
    from tfgpu_install.env.fingerprint import env_fingerprint

    driver = ""
    try:
        driver = ctx.sys_path("/proc/driver/nvidia/version").read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        pass
    h = hashlib.sha256()
    for part in (env_fingerprint(Path(env)), driver, json.dumps(plan.to_json(), sort_keys=True)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def plan_from_env(env: Path, cpu_only: bool = False) -> CheckPlan:
    """Without a recorded plan: what the env's own wheels say was placed (dist-info names)."""
    found: dict[str, str] = {}
    for dist in dist_info_dirs(env):
        name, _, version = dist.name[: -len(".dist-info")].partition("-")
        found[name.lower().replace("_", "-")] = version
    # nvidia-cuda-runtime-cu11/-cu12; CUDA 13's wheel dropped the suffix (nvidia-cuda-runtime 13.x).
    cuda = next((v for k, v in found.items() if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", k)), None)
    cudnn = next((v for k, v in found.items() if k.startswith("nvidia-cudnn-cu")), None)
    tf = found.get("tensorflow") or found.get("tensorflow-cpu")
    return CheckPlan(cuda=".".join(cuda.split(".")[:2]) if cuda else None, cudnn=cudnn, tensorflow=tf,
                     cpu_only=cpu_only)


# ---- rendering -----------------------------------------------------------------------------------
def _benchmark_blocks(six: Optional[LayerResult]) -> list[Block]:
    """The benchmark layer's table and burn bullets (none when it did not run)."""
    blocks: list[Block] = []
    bench = six.measured.get("benchmark") if six else None
    if bench:
        blocks.append(table(f"Matmul benchmark ({bench.get('device')})",
                            ("n", "CPU GFLOP/s", "GPU FP32", "GPU TF32", "GPU bf16", "speed-up (TF default math)"),
                            [(r["n"], r["cpu_gflops"], r.get("fp32_gflops", r["gpu_gflops"]), r.get("tf32_gflops"),
                              r.get("bf16_gflops"), f"{r['speedup']}x" + (f" ({r['gpu_math']})" if r.get("gpu_math")
                                                                           else ""))
                             for r in bench["sizes"]]))
        top = bench.get("headline") or {}
        if top:
            blocks.append(Text(f"Headline: {top['gflops']} GFLOP/s at n={top.get('n')} with TensorFlow's default "
                               f"math, {top['math']} ({top['why']})"))
    burns = (six.measured.get("burns") if six else None) or []
    if burns:  # the SGEMM burn: one line per GPU, in the words of the health report
        bad = any(b.get("mismatches") or (b.get("health") or {}).get("state") in ("needs_reset", "failing")
                  or (b.get("host_reference") or {}).get("mismatches") for b in burns)
        hot = any((b.get("heat") or {}).get("verdict") in ("hot", "slowing") for b in burns)
        head = (f"Burn: {len(burns)} GPUs under load at once" if len(burns) > 1 else "Burn") + \
            f", {burns[0].get('seconds')} s, every product checked"
        style = "error" if bad else "warn" if hot else ""
        blocks.append(Bullets(head, tuple(str(b.get("line")) for b in burns), style))
    burn = (six.measured.get("tf_burn") or ({} if burns else six.measured.get("burn")) if six else None) or {}
    if burn:
        tele = burn.get("telemetry", {})
        items = [f"TensorFlow: {burn['iterations']} matmuls of {burn['n']} in {burn['seconds']}s, {burn['gflops']} "
                 f"GFLOP/s, {burn['mismatches']} wrong results"]
        if burn.get("duty_cycle") is not None:
            items.append(f"GPU busy {burn['duty_cycle']:.0%} of the burn ({burn.get('gpu_gflops')} GFLOP/s while busy)")
        units: tuple[tuple[SeriesKey, str], ...] = (("temp_c", "°C"), ("sm_mhz", "MHz"), ("power_w", "W"),
                                                    ("util_pct", "%"))
        for key, unit in units:
            if key in tele:
                items.append(f"{key}: {tele[key]['min']}-{tele[key]['max']} {unit}")
        items.append("throttled: " + (", ".join(burn["throttled"]) or "no"))
        if tele.get("error"):
            items.append(str(tele["error"]))
        blocks.append(Bullets("Burn test", tuple(items), "error" if burn["throttled"] or burn["mismatches"] else ""))
    return blocks


def _notes(report: VerifyReport) -> list[str]:
    notes = []
    mp = report.extras.get("mixed_precision")
    if mp:
        notes.append(f"mixed precision: {'eligible' if mp['eligible'] else 'not recommended'} ({mp['why']})")
    vis = report.extras.get("visible_devices") or {}
    if vis.get("CUDA_VISIBLE_DEVICES") is not None:
        notes.append(f"CUDA_VISIBLE_DEVICES={vis['CUDA_VISIBLE_DEVICES']!r}")
    if vis.get("note"):
        notes.append(str(vis["note"]))
    jit = report.extras.get("ptx_jit")
    if jit and jit.get("compute_capabilities"):
        notes.append(f"compute capability {', '.join(jit['compute_capabilities'])} has no SASS in this TensorFlow "
                     f"build: {jit['note']}")
    ms = report.extras.get("mirrored_strategy")
    if ms:
        notes.append(f"MirroredStrategy: {ms['replicas']} replica(s) for {ms['gpus']} GPU(s)"
                     + ("" if ms["sees_all"] else " - it does not see every GPU"))
    for fail in report.tf_log.get("dlopen_failures", []):
        if fail.get("harmless") or report.mode == "cpu":  # a CPU env lacks libcuda by design
            continue
        notes.append(f"TensorFlow could not load {fail['library']}: {fail.get('dlerror') or ''}".rstrip(": "))
    return notes


def report_blocks(report: VerifyReport) -> list[Block]:
    blocks: list[Block] = [table("Verification", ("layer", "check", "result", "measured"),
                                 [(lay.layer, lay.name, lay.status, lay.summary) for lay in report.layers])]
    bad = report.first_failure
    if bad is not None:
        err = f" [{bad.error['name']} = {bad.error['code']}]" if bad.error else ""
        blocks.append(Text(f"Layer {bad.layer} ({bad.name}) failed{err}: {bad.summary}", "error"))
        if bad.hint:
            blocks.append(Text(f"Fix: {bad.hint}", "warn"))
    else:
        blocks.append(Text(report.summary(), "ok"))
    for lay in report.layers:
        if lay.status == "pass" and lay.hint:  # passed, with a warning (nouveau bound, throttling)
            blocks.append(Text(f"Note on layer {lay.layer} ({lay.name}): {lay.hint}", "warn"))
    blocks += _benchmark_blocks(report.layer("benchmark"))
    notes = _notes(report)
    if notes:
        blocks.append(Bullets("Also", tuple(notes)))
    if report.crashed and report.tf_log.get("tail"):
        blocks.append(Bullets("Last lines of TensorFlow's log", tuple(report.tf_log["tail"][-10:]), "dim"))
    return blocks
