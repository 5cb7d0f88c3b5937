"""From a resolution to the ordered steps an install runs (pure: builds objects, runs nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

from tfgpu_install.facts.model import Facts
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.model import Resolution
from tfgpu_install.steps.base import Step


def build_steps(resolution: Resolution, options: InstallOptions, facts: Optional[Facts] = None,
                expected: Optional[Mapping[str, tuple[str, str]]] = None) -> list[Step]:
    """The ordered steps for this resolution: env.create, packages.install, libraries.check,
    [cudnn.*], activation.write, [shell-rc.write], [ldconfig.system], verify.run, snapshot.record.
    expected: what each distribution's files must be by the env's known-good snapshot (a re-run
    reinstalls another build of the same version; snapshot.model.known_builds).

    Pure: it builds step objects and runs nothing. Rollback rebuilds the same list from the
    journaled plan (plan/journaled.py) to find each step's undo."""
    from tfgpu_install.env.target import TargetEnv
    from tfgpu_install.errors import UnsatisfiableError
    from tfgpu_install.snapshot.record import RecordSnapshot
    from tfgpu_install.steps.activation import WriteActivation
    from tfgpu_install.steps.cudnn.place import cudnn_steps, placed_lib_dir
    from tfgpu_install.steps.env import CreateEnv
    from tfgpu_install.steps.ldconfig import SystemLdconfig
    from tfgpu_install.steps.libraries import CheckLibraries
    from tfgpu_install.steps.packages import InstallPackages
    from tfgpu_install.steps.shell_rc import WriteShellRc
    from tfgpu_install.steps.system_libraries import CheckSystemLibraries
    from tfgpu_install.steps.verify import VerifyEnv
    from tfgpu_install.verify.host import CheckPlan

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
    steps: list[Step] = []
    if (choice.cuda and choice.cuda_from == "system" and choice.sonames and options.backend == "venv"
            and options.cuda_source != "redist" and not cpu_only):
        # No wheels for CUDA 10.x / 11.0: refuse before installing when the system lacks them
        # (the conda backend and --cuda-source redist bring their own).
        steps.append(CheckSystemLibraries(choice.tensorflow, choice.cuda, choice.sonames))
    steps += [
        CreateEnv(target, choice.python, Path(base_python) if base_python else None, seed_pip=options.seed_pip,
                  channel=options.conda_channel),
        InstallPackages.from_choice(target, choice, options, expected),
    ]
    cuda_steps, cuda_libs = _system_cuda_steps(choice, options, target.path)
    steps += cuda_steps
    extra_libs += cuda_libs
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
    from tfgpu_install.snapshot.document import RecordedResolution

    steps.append(RecordSnapshot(target.path, options.backend,
                                RecordedResolution(resolution, tuple(options.with_requirements)),
                                cpu_only=cpu_only, facts=facts))
    return steps


def _system_cuda_steps(choice: Any, options: InstallOptions, env: Path) -> tuple[list[Step], list[Path]]:
    """A release whose wheels bring no CUDA (`cuda_from: system`): NVIDIA's redist archives
    (--cuda-source redist), or on the conda backend the CUDA/cuDNN conda packages. Returns the
    steps and the library dirs the activation must put on LD_LIBRARY_PATH."""
    if not choice.cuda or choice.cuda_from != "system":
        return [], []
    profiles = Path(options.extra["profiles_dir"]) if options.extra.get("profiles_dir") else None
    if options.cuda_source == "redist":
        from tfgpu_install.steps.cuda.place import cuda_redist_steps

        return cuda_redist_steps(choice, options, env, profiles)
    if options.backend == "conda":
        from tfgpu_install.steps.conda_packages import conda_cuda_step

        step = conda_cuda_step(env, choice.cuda, options.conda_channel, options.name, profiles)
        return ([step], [env / "lib"]) if step is not None else ([], [])
    return [], []
