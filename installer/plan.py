"""From a resolution to the ordered steps an install runs (pure: builds objects, runs nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from .resolver_model import Resolution
from .steps.base import Step


@dataclass(frozen=True)
class InstallOptions:
    env: Path  # target environment path
    backend: str = "venv"  # "venv" | "conda"
    name: Optional[str] = None  # conda named env
    python: Optional[str] = None  # interpreter path chosen for the env
    system_ldconfig: bool = False
    shell_rc: Optional[Path] = None
    allow_cpu: bool = False
    cudnn_source: str = "wheel"  # "wheel" | "redist" | "archive"
    cudnn_mirror: Optional[str] = None
    cudnn_archive: Optional[Path] = None
    cudnn_prefix: Optional[Path] = None
    quarantine_stale: bool = False
    index_url: Optional[str] = None  # else PIP_INDEX_URL / UV_INDEX_URL from the environment
    seed_pip: bool = False  # give a uv-made venv its own pip (uv's venvs have none by default)
    extra: dict[str, str] = field(default_factory=dict)


def build_steps(resolution: Resolution, options: InstallOptions) -> list[Step]:
    """The ordered steps for this resolution: env.create, packages.install, libraries.check,
    [cudnn.*], activation.write, [shell-rc.write], [ldconfig.system], verify.run, snapshot.record.

    Pure: it builds step objects and runs nothing. Rollback rebuilds the same list from the
    journaled plan (options_to_json / resolution_from_json) to find each step's undo."""
    from .errors import UnsatisfiableError
    from .steps.activation import WriteActivation, WriteShellRc
    from .steps.cudnn import cudnn_steps, placed_lib_dir
    from .steps.env import CreateEnv, TargetEnv
    from .steps.ldconfig import SystemLdconfig
    from .steps.libraries import CheckLibraries
    from .steps.packages import InstallPackages
    from .steps.snapshot_point import RecordSnapshot
    from .steps.verify import VerifyEnv
    from .verify import CheckPlan

    choice = resolution.choice
    if choice is None:
        raise UnsatisfiableError(
            "no TensorFlow/CUDA/cuDNN/Python combination fits: there is nothing to install",
            "; ".join(resolution.remedies) or "see `tfgpu-install plan` for the reasons",
        )
    # --allow-cpu only lowers the bar where the resolver found no usable GPU: a GPU that is
    # there must still pass the GPU layers.
    cpu_only = resolution.cpu_only
    target = TargetEnv.at(options.env, options.backend, options.name)
    base_python = options.python or choice.python_path
    placed = placed_lib_dir(options)
    extra_libs = [placed] if placed is not None else []
    steps: list[Step] = [
        CreateEnv(target, choice.python, Path(base_python) if base_python else None, seed_pip=options.seed_pip),
        InstallPackages.from_choice(target, choice, options),
    ]
    if choice.cuda and choice.cuda_from == "pip":
        steps.append(CheckLibraries(target, choice.cuda, choice.cudnn, dict(choice.pins)))
    if choice.cudnn:
        steps += cudnn_steps(resolution, options, target.path)
    steps.append(WriteActivation(target.path, options.backend, extra_lib_dirs=extra_libs))
    if options.shell_rc is not None:
        steps.append(WriteShellRc(options.shell_rc, target.path, options.backend))
    if options.system_ldconfig:
        steps.append(SystemLdconfig(target.path, extra_lib_dirs=extra_libs))
    check_plan = CheckPlan.from_choice(choice, lib_dirs=[str(d) for d in extra_libs], cpu_only=cpu_only)
    steps.append(VerifyEnv(target.path, check_plan))
    steps.append(RecordSnapshot(target.path, options.backend, resolution.to_json(), cpu_only=cpu_only))
    return steps


# --- the plan as the journal keeps it (rollback rebuilds the steps from it) ----------------


def options_to_json(options: InstallOptions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(options):
        value = getattr(options, f.name)
        out[f.name] = str(value) if isinstance(value, Path) else value
    return out


def options_from_json(data: dict[str, Any]) -> InstallOptions:
    kwargs: dict[str, Any] = {}
    for f in fields(InstallOptions):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name in _PATH_FIELDS and value is not None:
            value = Path(value)
        kwargs[f.name] = value
    return InstallOptions(**kwargs)


_PATH_FIELDS = ("env", "shell_rc", "cudnn_archive", "cudnn_prefix")


def resolution_from_json(data: dict[str, Any]) -> Resolution:
    from .resolver_model import Choice, Rejection

    raw = data.get("choice")
    choice = None
    if isinstance(raw, dict):
        known = {f.name for f in fields(Choice)}
        choice = Choice(**{k: v for k, v in raw.items() if k in known})
    return Resolution(
        profile=str(data.get("profile", "")),
        choice=choice,
        reasons=tuple(data.get("reasons") or ()),
        rejected=tuple(Rejection(r["tensorflow"], tuple(r.get("reasons") or ())) for r in data.get("rejected") or ()),
        options=tuple(data.get("options") or ()),
        remedies=tuple(data.get("remedies") or ()),
        warnings=tuple(data.get("warnings") or ()),
        cpu_only=bool(data.get("cpu_only")),
    )


def plan_to_json(resolution: Resolution, options: InstallOptions) -> dict[str, Any]:
    return {"resolution": resolution.to_json(), "options": options_to_json(options)}


def steps_from_plan(plan: dict[str, Any]) -> list[Step]:
    """The steps of a journaled plan (see plan_to_json)."""
    if "restore" in plan:  # a `snapshot restore` run: its own step list (installer/restore.py)
        from .restore import steps_from_restore_plan

        return steps_from_restore_plan(plan)
    return build_steps(resolution_from_json(plan["resolution"]), options_from_json(plan["options"]))
