"""From a resolution to the ordered steps an install runs (pure: builds objects, runs nothing)."""

from __future__ import annotations

from pathlib import Path

from installer.plan.options import InstallOptions
from installer.resolver.model import Resolution
from installer.steps.base import Step


def build_steps(resolution: Resolution, options: InstallOptions) -> list[Step]:
    """The ordered steps for this resolution: env.create, packages.install, libraries.check,
    [cudnn.*], activation.write, [shell-rc.write], [ldconfig.system], verify.run, snapshot.record.

    Pure: it builds step objects and runs nothing. Rollback rebuilds the same list from the
    journaled plan (plan/journaled.py) to find each step's undo."""
    from installer.errors import UnsatisfiableError
    from installer.steps.activation import WriteActivation
    from installer.steps.cudnn.place import cudnn_steps, placed_lib_dir
    from installer.steps.env import CreateEnv, TargetEnv
    from installer.steps.ldconfig import SystemLdconfig
    from installer.steps.libraries import CheckLibraries
    from installer.steps.packages import InstallPackages
    from installer.steps.record import RecordSnapshot
    from installer.steps.shell_rc import WriteShellRc
    from installer.steps.verify import VerifyEnv
    from installer.verify.host import CheckPlan

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
