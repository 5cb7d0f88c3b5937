"""`plan`: the combination this machine can run, why, and the steps an install would run (built,
never run). commands/plan.py renders it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tfgpu_install.app.resolution import ResolveRequest
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.facts.model import Facts
from tfgpu_install.resolver.model import Resolution
from tfgpu_install.steps.base import Step


@dataclass(frozen=True)
class Planned:
    facts: Facts
    resolution: Resolution
    steps: tuple[Step, ...]  # what an install would run (none when nothing fits)
    env: Optional[Path]  # where an install would put the env
    no_gpu: bool  # no usable GPU here and no --allow-cpu

    @property
    def exit_code(self) -> int:
        if self.resolution.choice is not None:
            return int(ExitCode.OK)
        return int(ExitCode.NO_GPU if self.no_gpu else ExitCode.UNSATISFIABLE)


def plan(ctx: Context, req: ResolveRequest) -> Planned:
    from tfgpu_install.app.envs import default_env_path
    from tfgpu_install.app.resolution import resolve_machine
    from tfgpu_install.plan.install import build_steps
    from tfgpu_install.plan.options import InstallOptions
    from tfgpu_install.resolver.resolve import has_usable_gpu

    resolved = resolve_machine(ctx, req)
    resolution, choice = resolved.resolution, resolved.resolution.choice
    if choice is None:
        return Planned(resolved.facts, resolution, (), None,
                       no_gpu=not has_usable_gpu(resolved.facts) and not req.allow_cpu)
    env = default_env_path(ctx, choice)
    options = InstallOptions(env=env, python=choice.python_path, backend="venv" if choice.python_path else "conda",
                             allow_cpu=req.allow_cpu)
    return Planned(resolved.facts, resolution, tuple(build_steps(resolution, options)), env, no_gpu=False)
