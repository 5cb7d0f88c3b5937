"""`tfgpu-install kernel install|remove [--env E] [--name N] [--sys-prefix]`: the env as a
Jupyter kernel that sees its CUDA libraries (launched through the env's bin/tfgpu-run).

Where: the user's Jupyter data dir ($JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else
~/.local/share/jupyter) under kernels/NAME, or with --sys-prefix the env's own
share/jupyter/kernels/NAME (found by a Jupyter that runs from the env). The install is one
journaled step (steps/kernel.py) in the env's journal, so `rollback` removes the kernel too;
`kernel remove` and remove_kernels() (for `envs remove`) remove only specs this tool wrote
for the env. Every check runs before the first change: the env, its launcher, ipykernel in
the env, the name, and that a kernel of that name is not someone else's."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, EnvironmentProblem, UsageError
from tfgpu_install.guard.shellquote import command
from tfgpu_install.steps.kernel import SPEC, RegisterKernel, owner_env, remove_kernel_dir

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # what jupyter_client accepts as a kernel name


@dataclass(frozen=True)
class KernelRequest:
    env: Optional[str] = None
    name: Optional[str] = None
    sys_prefix: bool = False
    yes: bool = True  # a kernel spec is one small file: no question


def user_kernels_dir(ctx: Context) -> Path:
    """Absolute, always: the journal keeps it for rollback, which may run from another directory
    (a relative JUPYTER_DATA_DIR is Jupyter's relative to where it runs: this one's, resolved now;
    a relative XDG_DATA_HOME is invalid by the XDG spec and ignored)."""
    import os

    base = ctx.env("JUPYTER_DATA_DIR")
    if base:
        return Path(os.path.abspath(base)) / "kernels"
    xdg = ctx.env("XDG_DATA_HOME")
    root = Path(xdg) if xdg and os.path.isabs(xdg) else Path(os.path.abspath(ctx.home)) / ".local" / "share"
    return root / "jupyter" / "kernels"


def kernel_dirs(ctx: Context, env: Path) -> list[Path]:
    return [user_kernels_dir(ctx), Path(env) / "share" / "jupyter" / "kernels"]


def default_name(env: Path) -> str:
    base = re.sub(r"[^a-z0-9._-]+", "-", Path(env).name.lower()).strip("-._") or "env"
    return ("tfgpu-" + base)[:64]


def _env(ctx: Context, given: Optional[str]) -> Path:
    from tfgpu_install.app.envs import no_env_error, target_env

    env = target_env(ctx, given)
    if not env.is_dir():
        raise no_env_error(env)  # the one "no such env" answer (exit 6), as every command gives it
    return env


@dataclass(frozen=True)
class Registered:
    """`kernel install`'s outcome (commands/kernel.py renders it)."""

    env: Path
    name: str
    path: Path  # the kernel's directory
    changed: bool  # False: it was registered already, nothing written
    argv: tuple[str, ...]  # what Jupyter starts


@dataclass(frozen=True)
class Removed:
    """`kernel remove`'s outcome: the kernel directories removed (none: nothing to do)."""

    env: Path
    name: Optional[str]  # the one asked for (None: every kernel of the env)
    removed: tuple[Path, ...]


def install(ctx: Context, req: KernelRequest) -> Registered:
    from tfgpu_install.app.provision import ProvisionRequest, provision
    from tfgpu_install.env.layout import installed_dists, site_packages_dirs
    from tfgpu_install.plan.journaled import last_journaled_plan

    env = _env(ctx, req.env)
    name = req.name or default_name(env)
    if not NAME.match(name):
        raise UsageError(f"--name {name!r} is not a kernel name",
                         "use lower-case letters, digits, '.', '_' and '-' (at most 64), e.g. --name tf-gpu")
    if not (env / "bin" / "tfgpu-run").is_file():
        raise EnvironmentProblem(f"{env} has no bin/tfgpu-run launcher", "install the env with tfgpu-install first",
                                 ref="no-launcher")
    sites = site_packages_dirs(env)
    if not any("ipykernel" in installed_dists(sp) for sp in sites):
        raise EnvironmentProblem(f"{env} has no ipykernel, which a Jupyter kernel runs",
                                 "add it first: "
                                 f"`{command(ctx, 'tfgpu-install', 'add', 'ipykernel', '--env', str(env))}`",
                                 ref="no-ipykernel")
    plan = last_journaled_plan(ctx, env)
    if plan is None:
        raise BadInputError(f"no install by tfgpu-install is recorded for {env}",
                            "install the env with tfgpu-install first", ref="no-plan")
    kdir = (env / "share" / "jupyter" / "kernels" if req.sys_prefix else user_kernels_dir(ctx)) / name
    spec = kdir / SPEC
    owner = owner_env(spec) if spec.exists() or spec.is_symlink() else str(env)
    if owner != str(env) or kdir.is_symlink():
        raise EnvironmentProblem(f"a kernel named {name!r} already exists at {kdir} and is not this env's",
                                 "choose another --name, or remove that kernel (`jupyter kernelspec remove "
                                 f"{name}`)", ref="kernel-exists")
    choice = plan.resolution.choice
    tf = f"TensorFlow {choice.tensorflow}" if choice is not None and choice.tensorflow else "TF"
    step = RegisterKernel(env, kdir, f"{tf} ({env.name})")
    kernel_plan = replace(plan, restore=None, kernel=step.to_plan()).to_json()
    # registering a kernel asks nothing (a file in the user's Jupyter dir, undone by `kernel remove`)
    done = provision(ctx, ProvisionRequest(env=env, steps=[step], plan=kernel_plan, ask=lambda _: None))
    return Registered(env, name, kdir, done.report is not None,
                      (str(env / "bin" / "tfgpu-run"), str(env / "bin" / "python"), "-m", "ipykernel_launcher"))


def remove_kernels(ctx: Context, env: Path, name: Optional[str] = None) -> list[Path]:
    """Remove the kernel specs this tool wrote for `env` (all of them, or the one named);
    what `kernel remove` and `envs remove` call. Returns the dirs removed."""
    removed = []
    for base in kernel_dirs(ctx, env):
        if not base.is_dir() or base.is_symlink():
            continue
        for kdir in sorted(base.iterdir()):
            if name is not None and kdir.name != name:
                continue
            if kdir.is_dir() and not kdir.is_symlink() and owner_env(kdir / SPEC) == str(env):
                remove_kernel_dir(kdir)
                removed.append(kdir)
    return removed


def remove(ctx: Context, req: KernelRequest) -> Removed:
    env = _env(ctx, req.env) if req.env is None else Path(req.env).expanduser().absolute()
    return Removed(env, req.name, tuple(remove_kernels(ctx, env, req.name)))
