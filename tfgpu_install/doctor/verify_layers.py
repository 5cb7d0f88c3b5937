"""doctor follows verify: `doctor --env E` answers for the layers of `verify --env E`, in the
order and by the names of the one layer table (verify/gpucheck/tfgpucheck_layers.py).

Each layer gets what this machine lets doctor examine now:
  - hardware, driver: what the walk read from the driver (nvidia-smi); without a GPU "not checked".
  - cuda-runtime, cudnn, cublas: the env's own libraries (nvidia/*/lib), found under the sonames the
    loader will ask for and loaded in a child of the env's Python (steps/libraries.py, the install's
    own check); cuDNN 9's run-time sub-libraries too. Their GPU calls need a GPU: with the libraries
    fine, the layer stays "not checked" (never "ok" for what was not run).
  - tensorflow: `import tensorflow` in the env (the walk's import probe; a missing numpy shows here).
The first layer that fails is the cause; the layers after it are "not checked", as verify stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from tfgpu_install.doctor.walkstate import BROKEN, OK, Check, Walk
from tfgpu_install.guard import shellquote
from tfgpu_install.verify.gpucheck import tfgpucheck_layers as table

if TYPE_CHECKING:
    from tfgpu_install.env.target import TargetEnv
    from tfgpu_install.steps.libraries import ExpectedLib
    from tfgpu_install.verify.host import CheckPlan

PASSED, FAILED, NOT_CHECKED = "ok", "failed", "not checked"
NO_GPU = "no GPU here: not checked"

# The GPU layers doctor answers for from what the walk read of the driver (nvidia-smi).
_DRIVER_READ = ("hardware", "driver")


def _wheels() -> dict[str, str]:
    """Library layer -> the env wheel behind it, from the layer rows themselves (read when asked: a row
    added to the table is seen here without a second list to keep in step)."""
    return {lay.name: lay.wheel for lay in table.LAYERS if lay.wheel}


@dataclass(frozen=True)
class LayerVerdict:
    name: str  # a name of the layer table
    status: str  # ok | failed | not checked
    summary: str  # what was seen
    why: str = ""  # not checked: why
    cause: str = ""
    fix: str = ""
    evidence: tuple[str, ...] = ()
    libraries: dict[str, str] = field(default_factory=dict)  # soname -> "loads" or why not
    check: Optional[Check] = None  # the walk's check this verdict rests on (the import's)

    @property
    def number(self) -> int:
        return table.number(self.name)

    def as_check(self) -> Check:
        """A failed layer as the walk's diagnosis."""
        if self.check is not None:
            return self.check
        layer = "cudnn" if self.name == "cudnn" else "libraries"
        return Check(layer, f"{self.name} libraries", BROKEN, self.summary, self.cause, self.fix, self.evidence)

    def to_json(self) -> dict[str, object]:
        return {"layer": self.number, "name": self.name, "status": self.status, "summary": self.summary,
                "why": self.why or None, "cause": self.cause or None, "fix": self.fix or None,
                "evidence": list(self.evidence), "libraries": dict(self.libraries)}


def verify_layers(w: Walk, import_checks: Callable[[], list[Check]],
                  stopped: Optional[Check] = None) -> tuple[LayerVerdict, ...]:
    """The default layers of the table, in order, for the env of this walk. `import_checks`: the
    walk's env/import checks (asked for only when the layers below them did not fail); `stopped`:
    a host check the walk found broken below the env (the env's layers are then not judged: that
    cause comes first)."""
    env = w.env_files
    libs = _library_verdicts(w) if env is not None and env.exists and env.python and stopped is None else {}
    out: list[LayerVerdict] = []
    failed: Optional[LayerVerdict] = None
    wheels = _wheels()
    for lay in table.LAYERS:
        if not lay.default:
            continue
        if failed is not None:
            out.append(LayerVerdict(lay.name, NOT_CHECKED, "not judged",
                                    why=f"layer {failed.number} ({failed.name}) failed first: fix it, then run "
                                        "doctor again"))
            continue
        if lay.name in wheels:
            v = _with_gpu_part(w, libs.get(lay.name) or _not_examined(lay.name, w, stopped))
        elif lay.needs == "gpu" and lay.name in _DRIVER_READ:
            v = _gpu_verdict(w, lay.name, stopped)
        elif lay.needs == "gpu":  # a layer doctor has no check for: said so, never passed
            env_path = w.env_files.path if w.env_files is not None else "ENV"
            v = LayerVerdict(lay.name, NOT_CHECKED, "not examined by doctor",
                             why=f"doctor has no check for this layer: `tfgpu-install verify --env {env_path}` runs it")
        else:
            v = _tensorflow_verdict(w, import_checks() if stopped is None else [], stopped)
        out.append(v)
        if v.status == FAILED:
            failed = v
    return tuple(out)


def first_failed(layers: tuple[LayerVerdict, ...]) -> Optional[LayerVerdict]:
    return next((v for v in layers if v.status == FAILED), None)


# ------------------------------------------------------------------ hardware, driver


def _gpu_seen(w: Walk) -> bool:
    from tfgpu_install.facts import gpu as smi

    return w.reading is not None and w.reading.state == smi.OK  # the driver answered (a GPU to answer for)


def _gpu_verdict(w: Walk, name: str, stopped: Optional[Check]) -> LayerVerdict:
    hardware = name == table.NAMES[0]
    count = len(w.gpus or (w.reading.gpus if w.reading is not None else ()))
    if hardware and (_gpu_seen(w) or w.pci_nvidia):
        return LayerVerdict(name, PASSED, (f"nvidia-smi lists {count} GPU(s)" if count else "nvidia-smi answers")
                            if _gpu_seen(w) else "an NVIDIA device is on the PCI bus")
    if not hardware and stopped is not None and stopped.layer == "driver":
        return LayerVerdict(name, FAILED, stopped.summary, cause=stopped.cause, fix=stopped.fix,
                            evidence=stopped.evidence, check=stopped)
    if not _gpu_seen(w):
        seen = next((c.summary for c in w.checks if c.layer == "driver"), "no NVIDIA GPU or driver answered")
        return LayerVerdict(name, NOT_CHECKED, seen, why=NO_GPU)
    assert w.reading is not None
    return LayerVerdict(name, PASSED, f"driver {w.reading.driver_version} answers (nvidia-smi)")


# ------------------------------------------------------------------ the env's libraries


def _not_examined(name: str, w: Walk, stopped: Optional[Check]) -> LayerVerdict:
    if stopped is not None:
        return LayerVerdict(name, NOT_CHECKED, "not examined",
                            why=f"the walk stopped at {stopped.name} ({stopped.summary}): fix that first")
    if w.env_files is None or not w.env_files.exists or not w.env_files.python:
        return LayerVerdict(name, NOT_CHECKED, "not examined", why="no Python environment to load its libraries in")
    return LayerVerdict(name, NOT_CHECKED, f"the env has no {_wheels()[name]} wheel",
                        why="its libraries come from elsewhere (the system, or a CPU-only env): verify loads "
                            "them on a GPU")


def _with_gpu_part(w: Walk, v: LayerVerdict) -> LayerVerdict:
    """Libraries that load are half the layer: the GPU calls (context, handle, SGEMM) need a GPU."""
    if v.status != PASSED:
        return v
    if not _gpu_seen(w):
        return LayerVerdict(v.name, NOT_CHECKED, v.summary, why=f"{NO_GPU} (its libraries load; its GPU calls "
                            "were not made)", libraries=v.libraries)
    if v.name == "cuda-runtime" and w.probe is not None and w.probe.gpus:
        return LayerVerdict(v.name, PASSED, f"{v.summary}; TensorFlow's CUDA runtime lists {len(w.probe.gpus)} "
                            "GPU(s)", libraries=v.libraries)
    env = shellquote.command(w.ctx, str(w.env_files.path)) if w.env_files is not None else "ENV"
    return LayerVerdict(v.name, NOT_CHECKED, v.summary, why="its libraries load; its GPU calls are run by "
                        f"`tfgpu-install verify --env {env}`", libraries=v.libraries)


def _library_verdicts(w: Walk) -> dict[str, LayerVerdict]:
    """name -> verdict on the env's libraries for each library layer (one child process loads them all)."""
    from tfgpu_install.env.target import TargetEnv
    from tfgpu_install.steps.libraries import expected_libraries, load_failures
    from tfgpu_install.verify.host import plan_from_env

    assert w.env_files is not None
    env = TargetEnv.at(Path(w.env_files.path))
    plan = _recorded_plan(w) or plan_from_env(env.path)
    if not plan.cuda:
        return {}  # no CUDA wheels in the env (a CPU-only --allow-cpu env may still have them: examined)
    wanted = expected_libraries(plan.cuda, plan.cudnn)
    per_layer, problem = _layer_needs(env, wanted)
    present = [so for sonames in per_layer.values() for so in sonames if so not in problem]
    failed = load_failures(w.ctx, env, present) if present else {}
    shell = shellquote.shell_of(w.ctx.environ)
    return {name: _layer_verdict(name, sonames, problem, failed, wanted, env, shell)
            for name, sonames in per_layer.items()}


def _layer_needs(env: "TargetEnv", wanted: list["ExpectedLib"]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(layer -> the sonames it needs, in load order; soname -> why it is not in place ("... is missing from
    DIR")) for each library layer whose wheel the plan expects."""
    from tfgpu_install.steps.libraries import find_problems

    per_layer: dict[str, list[str]] = {}
    problem: dict[str, str] = {}
    for name, wheel in _wheels().items():
        libs = [lib for lib in wanted if lib.package.startswith(wheel + "-")]
        if not libs:
            continue
        per_layer[name] = [lib.soname for lib in libs]
        problem.update({f.lib.soname: f.problem for f in find_problems(env, libs) if f.problem is not None})
        if name == "cudnn" and any(lib.soname.endswith(".so.9") for lib in libs):
            have, lost, libdir = _cudnn9_parts(env)
            per_layer[name] += have + lost
            problem.update({so: f"{so} is missing from {libdir}" for so in lost})
    return per_layer, problem


def _layer_verdict(name: str, sonames: list[str], problem: dict[str, str], failed: dict[str, str],
                   wanted: list["ExpectedLib"], env: "TargetEnv", shell: str = "sh") -> LayerVerdict:
    """One library layer: passed when each of its sonames is in place and loads, else failed with the first."""
    seen = {so: _label(problem[so]) if so in problem else failed.get(so, "loads") for so in sonames}
    bad = [problem[so] if so in problem else f"{so} does not load: {failed[so]}"
           for so in sonames if so in problem or so in failed]
    if not bad:
        return LayerVerdict(name, PASSED, f"{', '.join(sonames)} load{'s' if len(sonames) == 1 else ''} "
                            f"(the env's {_wheels()[name]} wheel)",
                            libraries=seen)
    base = _wheels()[name]
    wheel = next(lib.package for lib in wanted if lib.package.startswith(base + "-"))
    how_many = "one is missing or does" if len(bad) == 1 else f"{len(bad)} are missing or do"
    return LayerVerdict(
        name, FAILED, bad[0] + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
        cause=f"TensorFlow loads {', '.join(sonames[:2])}{' ...' if len(sonames) > 2 else ''} from the env's "
              f"{base} wheel, and {how_many} not load: TensorFlow would not use the GPU (or abort "
              "on first use).",
        fix=f"Reinstall the wheel: `{shellquote.command(shell, 'tfgpu-install', 'install', '--env', str(env.path))}` "
            "(it reinstalls what is missing), or `"
            + shellquote.command(shell, "uv", "pip", "install", "--python", str(env.python), "--reinstall", wheel)
            + f"`; `{shellquote.command(shell, 'tfgpu-install', 'check', '--env', str(env.path))}` lists the damaged "
            "files.",
        evidence=tuple(bad), libraries=seen)


def _label(problem: str) -> str:
    """What the JSON says of a library not in place: "missing", or why it is not the one (soname, truncated)."""
    return "missing" if " is missing from " in problem else problem


def _recorded_plan(w: Walk) -> Optional["CheckPlan"]:
    """The plan the last verify recorded for this env (what verify --env checks against), if any."""
    from tfgpu_install.env.verification import read_record
    from tfgpu_install.errors import BadInputError
    from tfgpu_install.verify.host import CheckPlan

    assert w.env_files is not None
    try:
        record = read_record(w.ctx, Path(w.env_files.path))
    except BadInputError:
        return None  # an unusable record: what the env's wheels say, as verify without one
    return CheckPlan.from_record(record.plan) if record and record.plan else None


def _cudnn9_parts(env: "TargetEnv") -> tuple[list[str], list[str], Path]:
    """cuDNN 9's run-time sub-libraries (libcudnn_graph.so.9 ...): ([present], [missing], their dir).
    A required one is missing when the cuDNN wheel's RECORD says it installed it and the file is gone
    (a wheel that never shipped it is not asked for)."""
    from tfgpu_install.env.layout import dist_info_dirs, record_rows
    from tfgpu_install.verify.gpucheck.tfgpucheck_libs import CUDNN9_OPTIONAL, CUDNN9_SUBLIBS

    libdir = env.site_packages() / "nvidia" / "cudnn" / "lib"
    recorded: set[str] = set()
    for d in dist_info_dirs(env.path):
        if d.name.lower().startswith("nvidia_cudnn"):
            recorded |= {Path(row[0]).name for row in record_rows(d / "RECORD") or []
                         if row and row[0].startswith("nvidia/cudnn/lib/")}
    have = [n for n in CUDNN9_SUBLIBS + CUDNN9_OPTIONAL if (libdir / n).is_file()]
    lost = [n for n in CUDNN9_SUBLIBS if n in recorded and n not in have]
    return have, lost, libdir


# ------------------------------------------------------------------ tensorflow


def _tensorflow_verdict(w: Walk, import_checks: list[Check], stopped: Optional[Check]) -> LayerVerdict:
    name = next(lay.name for lay in table.LAYERS if lay.needs == "tensorflow")
    if stopped is not None:
        return _not_examined_tf(name, stopped)
    imp = next((c for c in import_checks
                if c.layer == "import" and c.name in ("environment", "tensorflow", "import tensorflow")), None)
    if imp is None:
        return LayerVerdict(name, NOT_CHECKED, "not examined", why="no env to import TensorFlow in")
    if imp.status == BROKEN:
        return LayerVerdict(name, FAILED, imp.summary, cause=imp.cause, fix=imp.fix, evidence=imp.evidence,
                            check=imp)
    if imp.status != OK:
        return LayerVerdict(name, NOT_CHECKED, imp.summary, why=imp.summary)
    if _gpu_seen(w):
        return LayerVerdict(name, PASSED, imp.summary, check=imp)
    return LayerVerdict(name, PASSED, f"{imp.summary}; on the CPU only (no GPU here: its GPU ops not run)",
                        check=imp)


def _not_examined_tf(name: str, stopped: Check) -> LayerVerdict:
    return LayerVerdict(name, NOT_CHECKED, "not examined",
                        why=f"the walk stopped at {stopped.name} ({stopped.summary}): fix that first")
