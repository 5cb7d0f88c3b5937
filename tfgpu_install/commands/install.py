"""`tfgpu-install [install] --profile stable`: the arguments, turned into an InstallRequest
(tfgpu_install/app/install.py does the work); the question before the first change and the screen after
it (upgrade shows the same)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Union

from tfgpu_install.commands.common import add_assume_flags, add_profile_flag, assume_flags, non_empty
from tfgpu_install.commands.package_plan import changed_in_env_blocks, package_blocks
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.guard import argtypes
from tfgpu_install.guard.envpath import env_path_arg
from tfgpu_install.guard.shellquote import activate_command, command, shell_of
from tfgpu_install.plan.options import options_to_json
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, human_bytes, table

if TYPE_CHECKING:
    from tfgpu_install.app.install import (
        Download,
        Findings,
        FreeSpace,
        Installed,
        InstallPlan,
        InstallQuestion,
        InstallRequest,
    )
    from tfgpu_install.engine.executor import ExecReport


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tfgpu_install.commands.plan import add_resolve_flags

    add_profile_flag(p)
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--dry-run", action="store_true", help="show the plan and each step's state; change nothing")
    g = p.add_argument_group("target environment")
    g.add_argument("--env", metavar="PATH", type=env_path_arg,
                   help="the env to create/update (default: under the user data dir, "
                   "named after the combination, e.g. tf2.17.1-cu12.3-py3.11)")
    g.add_argument("--backend", choices=("venv", "conda"), default=None,
                   help="venv (default when a suitable Python is here) or conda (conda/mamba/micromamba)")
    g.add_argument("--name", metavar="NAME", type=argtypes.env_name, help="a named conda env (with --backend conda)")
    g.add_argument("--python", metavar="X.Y|PATH", type=non_empty,
                   help="the Python for the env: a version or an interpreter path")
    g.add_argument("--index-url", metavar="URL", type=argtypes.url,
                   help="package index (default: PIP_INDEX_URL / UV_INDEX_URL / PyPI)")
    g.add_argument("--seed-pip", dest="seed_pip", action="store_true", default=True,
                   help="give the venv its own pip (the default; offline, from the interpreter's bundled wheel)")
    g.add_argument("--no-pip", dest="seed_pip", action="store_false",
                   help="no pip in the venv (add packages with `uv pip install --python ENV/bin/python`)")
    g.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it instead of failing")
    s = p.add_argument_group("system integration")
    s.add_argument("--system-ldconfig", action="store_true",
                   help="register the env's CUDA libraries in /etc/ld.so.conf.d and run ldconfig (root only)")
    s.add_argument("--shell-rc", metavar="FILE", type=non_empty,
                   help="add a marked block to FILE (e.g. ~/.bashrc) that activates the env")
    c = p.add_argument_group("cuDNN")
    c.add_argument("--cudnn-source", choices=("wheel", "redist", "archive"), default="wheel",
                   help="wheel (PyPI, default), redist (NVIDIA's redistributable archive), archive (a local file)")
    c.add_argument("--cudnn-mirror", metavar="URL", type=argtypes.url,
                   help="a mirror of NVIDIA's redist tree (with --cudnn-source redist)")
    c.add_argument("--cudnn-archive", metavar="PATH", type=non_empty,
                   help="a cuDNN archive you downloaded (with --cudnn-source archive)")
    c.add_argument("--cudnn-prefix", metavar="DIR", type=non_empty, help="place cuDNN here instead of inside the env")
    c.add_argument("--quarantine-stale", action="store_true",
                   help="move other cuDNN copies on the library path aside (undone by rollback)")
    add_cuda_source_flags(p)
    add_with_flags(p.add_argument_group("your project on top"))
    add_resolve_flags(p)
    add_assume_flags(p)


def add_with_flags(g: "argparse._ActionsContainer") -> None:
    """--with / --with-file (install; `add` takes the same file flag)."""
    g.add_argument("--with", dest="with_requirements", metavar="REQ", nargs="+", action="extend", default=[],
                   help="your own requirements, resolved with TensorFlow's pins (nothing TensorFlow needs can move)")
    g.add_argument("--with-file", dest="with_files", metavar="FILE", action="append", default=[], type=non_empty,
                   help="requirements from a requirements.txt, pylock.toml or pyproject.toml ([project] dependencies)")


def add_cuda_source_flags(p: argparse.ArgumentParser) -> None:
    """Where a release without CUDA wheels (TF 2.0-2.13) gets its CUDA user space."""
    g = p.add_argument_group("CUDA for releases without CUDA wheels (TF <= 2.13)")
    g.add_argument("--conda-channel", metavar="NAME|URL", default=None,
                   help="conda backend: the channel for Python and the cudatoolkit/cudnn packages "
                   "(default conda-forge)")
    g.add_argument("--cuda-source", choices=("default", "redist"), default="default",
                   help="default: conda packages on the conda backend; redist: NVIDIA's redistributable archives")
    g.add_argument("--cuda-mirror", metavar="URL", type=argtypes.url,
                   help="a mirror of NVIDIA's cuda/redist tree (with --cuda-source redist)")


def request_from_args(args: argparse.Namespace) -> "InstallRequest":
    from tfgpu_install.app.install import InstallRequest
    from tfgpu_install.app.resolution import ResolveRequest

    return InstallRequest(
        resolve=ResolveRequest(
            profile=args.profile, assume=assume_flags(args), allow_cpu=args.allow_cpu,
            allow_minor_compat=args.allow_minor_compat, restrict_gpus=args.restrict_gpus,
            strict_driver=args.strict_driver, python=args.python, backend=args.backend, conda_name=args.name,
            tensorflow=args.tensorflow,
        ),
        env=args.env, system_ldconfig=args.system_ldconfig, shell_rc=args.shell_rc, seed_pip=args.seed_pip,
        cudnn_source=args.cudnn_source, cudnn_mirror=args.cudnn_mirror, cudnn_archive=args.cudnn_archive,
        cudnn_prefix=args.cudnn_prefix, quarantine_stale=args.quarantine_stale, index_url=args.index_url,
        conda_channel=args.conda_channel, cuda_source=args.cuda_source, cuda_mirror=args.cuda_mirror,
        yes=args.yes, dry_run=args.dry_run, wait=args.wait, progress=not args.json,
        with_requirements=tuple(args.with_requirements), with_files=tuple(args.with_files),
    )


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.install import install
    from tfgpu_install.app.noop import remember
    from tfgpu_install.runner import SubprocessRunner

    result = installed(ctx, install(ctx, request_from_args(args), asker(ctx, args.yes)))
    # A real, changed-or-checked env: the stamp the next identical run answers from (commands/noop.py).
    if result.exit_code == 0 and not result.data.get("dry_run") and isinstance(ctx.runner, SubprocessRunner):
        remember(args.argv, ctx, result.data, noop_message(result.data["env"]))
    return result


def asker(ctx: Context, yes: bool) -> Callable[["InstallQuestion"], None]:
    """The question before an install's (or an upgrade's) first change, on the terminal; -y asks nothing."""
    from tfgpu_install.commands.confirm import confirm

    def ask(q: "InstallQuestion") -> None:
        confirm(ctx, yes, lambda: question(q))

    return ask


# --- the question -----------------------------------------------------------------------------

_MARK = {"done": "done", "unchanged": "unchanged", "applied": "applied", "pending": "to do"}


def _steps_table(title: str, report: "ExecReport") -> Block:
    return table(title, ("step", "state", "what"), [(s.id, _MARK.get(s.status, s.status), s.describe)
                                                    for s in report.steps])


def plan_blocks(plan: "InstallPlan", report: "ExecReport") -> list[Block]:
    """The choice, the env, what changes of the TensorFlow there, the warnings, and each step's state."""
    choice = plan.resolution.choice
    assert choice is not None
    cuda = f"CUDA {choice.cuda}, cuDNN {choice.cudnn}" if choice.cuda else "CPU build"
    blocks: list[Block] = [
        Heading(f"TensorFlow {choice.tensorflow} ({cuda}) on Python {choice.python}"),
        Text(f"env: {plan.options.env} ({plan.options.backend})"),
    ]
    if plan.before is not None and plan.before != choice.tensorflow:
        blocks.append(Text(f"TensorFlow in this env: {plan.before} → {choice.tensorflow} (installed now → planned)",
                           "warn"))
    if plan.resolution.cpu_only:
        blocks.append(Text("no usable GPU: TensorFlow will be verified on the CPU (gpu_verified: false)", "warn"))
    if plan.resolution.warnings:
        blocks.append(Bullets("warnings", tuple(plan.resolution.warnings), "warn"))
    blocks.append(_steps_table("steps", report))
    return blocks


def question(q: "InstallQuestion") -> list[Block]:
    """What the confirmation shows: the plan, the free space, the download and what it takes on disk, and
    every package it adds, changes or removes."""
    plan = plan_blocks(q.plan, q.preview)
    details = q.details()
    return plan + space_blocks(details.space) + download_blocks(details.download) + package_blocks(details.changes)


def space_blocks(space: Optional["FreeSpace"]) -> list[Block]:
    return [Text(f"disk: {human_bytes(space.free)} free at {space.at}", "dim")] if space is not None else []


def download_blocks(download: Optional["Download"]) -> list[Block]:
    if download is None:
        return []
    if download.sizes is None:
        return [Text("download: none from an index (--no-index); size on disk unknown", "dim")]
    return [Text(download.sizes.line(), "dim")]


# --- the result ---------------------------------------------------------------------------------


def installed(ctx: Context, done: "Installed") -> Result:
    """install's JSON document and screen: the plan and each step's state; after a dry run what would run,
    after a run what verification found and how to use the env, on a complete env that nothing was to do."""
    plan, report, env = done.plan, done.report, done.env
    blocks = plan_blocks(plan, report)
    if done.dry_run and done.download is not None:  # a dry run read by a person: the same sizes as the question
        blocks[-1:-1] = download_blocks(done.download) + package_blocks(done.changes)
    if done.dry_run:
        pending = sum(1 for s in report.steps if s.status == "pending")
        blocks[-1] = _steps_table("steps (dry run: nothing was changed)", report)
        blocks.append(Text(f"{pending} step(s) would run", "dim"))
    elif report.changed:
        blocks[-1] = _steps_table("steps", report)
        blocks += findings_blocks(env, done.findings)
        blocks.append(Text(f"done: activate with `{activate_command(ctx, str(env), plan.options.backend)}`, "
                           f"or run anything through `{command(ctx, str(env / 'bin' / 'tfgpu-run'))}`", "ok"))
        blocks.append(Text(add_packages_hint(env, shell_of(ctx.environ)), "dim"))
    else:
        blocks = [Text(noop_message(env), "ok")]
    if done.ran:
        blocks[-2:-2] = changed_in_env_blocks(done.changes)
    data: dict[str, object] = {
        "env": str(env),
        "dry_run": done.dry_run,
        "changed": report.changed,
        "resolution": plan.resolution.to_json(),
        "options": options_to_json(plan.options),
        "steps": report.to_json(),
        "gpu_verified": done.gpu_verified,
    }
    if done.changes is not None:
        data["packages"] = done.changes.to_json()
    choice = plan.resolution.choice
    assert choice is not None
    if plan.before is not None and plan.before != choice.tensorflow:
        data["tensorflow_change"] = {"from": plan.before, "to": choice.tensorflow}
    return Result(data=data, blocks=blocks, exit_code=int(ExitCode.OK))


def add_packages_hint(env: Path, shell: str = "sh") -> str:
    """How to add packages to the env, as it is now (pip only when the env has it), quoted for `shell`."""
    uv = f"`{command(shell, 'uv', 'pip', 'install', '--python', str(env / 'bin' / 'python'), 'PACKAGE')}`"
    if (env / "bin" / "pip").exists():
        return f"add packages: `pip install PACKAGE` in the activated env, or {uv}"
    return f"add packages: {uv} (this env has no pip: installed with --no-pip)"


def noop_message(env: Union[str, Path]) -> str:
    """The whole answer on a complete env (also what the no-op fast path, app/noop.py, prints)."""
    return f"{env} is already installed and verified: nothing to do"


def findings_blocks(env: Path, findings: Optional["Findings"]) -> list[Block]:
    """What verification found, for the last screen: per GPU its name, compute capability, the
    layers passed, matmul GFLOP/s and speed-up, mixed precision; or that only the CPU was checked."""
    if findings is None:
        return []
    report = findings.report
    if report is None:  # a record of another shape: say so
        return [Text(f"verification record for {env} not understood ({findings.not_understood}): "
                     "run `tfgpu-install verify`", "warn")]
    if not report.layers:
        return []
    # Names, not "5 tensorflow": a number before a name reads as a count of layers passed.
    passed = [lay.name for lay in report.layers if lay.status == "pass"]
    unchecked = [lay.name for lay in report.layers if lay.status == "skip"]
    items: list[str] = []
    if not report.gpu_verified:
        items.append("CPU only (--allow-cpu): GPU not checked; TensorFlow ran its matmul on the CPU")
    else:
        driver = report.layer("driver")
        for dev in (driver.measured.get("devices") if driver else None) or []:
            mem = f", {dev['memory_mib']} MiB" if dev.get("memory_mib") else ""
            items.append(f"GPU {dev.get('index')}: {dev.get('name')} (compute capability "
                         f"{dev.get('compute_capability') or '?'}{mem})")
        six = report.layer("benchmark")
        bench = six.measured.get("benchmark") if six else None
        if bench and bench.get("sizes"):
            top = bench["sizes"][-1]
            items.append(f"matmul {top['n']}x{top['n']}: {top['gpu_gflops']} GFLOP/s on {bench.get('device')}, "
                         f"{top['speedup']}x the CPU")
        mp = report.extras.get("mixed_precision")
        if mp:
            items.append(f"mixed precision: {'eligible' if mp.get('eligible') else 'not recommended'}"
                         + (f" ({mp['why']})" if mp.get("why") else ""))
    items.append(f"layers passed: {', '.join(passed) or 'none'}"
                 + (f"; not checked: {', '.join(unchecked)}" if unchecked else ""))
    return [Bullets("Verification", tuple(items), "ok" if report.ok else "error")]
