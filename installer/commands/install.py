"""`tfgpu-install [install] --profile stable`: probe, resolve, show the plan, confirm, run the
steps with a journal, verify, record a snapshot.

A re-run on a complete env is a no-op (every check() passes, verify and snapshot are
skipped while the env's fingerprint is unchanged). A re-run after a kill finishes the job.
No usable GPU and no --allow-cpu: stop after the probe with exit 3 (NO_GPU).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from installer.context import Context
from installer.errors import EnvironmentProblem, ExitCode, NoGpuError, UnsatisfiableError, UsageError
from installer.app.confirm import confirm
from installer.report import Block, Bullets, Heading, Result, Text, table
from installer.commands.common import add_assume_flags, add_profile_flag

if TYPE_CHECKING:
    from installer.engine.executor import ExecReport
    from installer.facts.model import Facts
    from installer.knowledge.model import Knowledge
    from installer.plan.options import InstallOptions
    from installer.resolver.model import Resolution


def add_arguments(p: argparse.ArgumentParser) -> None:
    from installer.commands.plan import add_resolve_flags

    add_profile_flag(p)
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--dry-run", action="store_true", help="show the plan and each step's state; change nothing")
    g = p.add_argument_group("target environment")
    g.add_argument("--env", metavar="PATH", help="the env to create/update (default: under the user data dir, "
                   "named after the combination, e.g. tf2.17.1-cu12.3-py3.11)")
    g.add_argument("--backend", choices=("venv", "conda"), default=None,
                   help="venv (default when a suitable Python is here) or conda (conda/mamba/micromamba)")
    g.add_argument("--name", metavar="NAME", help="a named conda env (with --backend conda)")
    g.add_argument("--python", metavar="X.Y|PATH", help="the Python for the env: a version or an interpreter path")
    g.add_argument("--index-url", metavar="URL", help="package index (default: PIP_INDEX_URL / UV_INDEX_URL / PyPI)")
    g.add_argument("--seed-pip", action="store_true",
                   help="give the venv its own pip (uv-made venvs have none: use `uv pip` or tfgpu-run)")
    g.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it instead of failing")
    s = p.add_argument_group("system integration")
    s.add_argument("--system-ldconfig", action="store_true",
                   help="register the env's CUDA libraries in /etc/ld.so.conf.d and run ldconfig (root only)")
    s.add_argument("--shell-rc", metavar="FILE",
                   help="add a marked block to FILE (e.g. ~/.bashrc) that activates the env")
    c = p.add_argument_group("cuDNN")
    c.add_argument("--cudnn-source", choices=("wheel", "redist", "archive"), default="wheel",
                   help="wheel (PyPI, default), redist (NVIDIA's redistributable archive), archive (a local file)")
    c.add_argument("--cudnn-mirror", metavar="URL",
                   help="a mirror of NVIDIA's redist tree (with --cudnn-source redist)")
    c.add_argument("--cudnn-archive", metavar="PATH",
                   help="a cuDNN archive you downloaded (with --cudnn-source archive)")
    c.add_argument("--cudnn-prefix", metavar="DIR", help="place cuDNN here instead of inside the env")
    c.add_argument("--quarantine-stale", action="store_true",
                   help="move other cuDNN copies on the library path aside (undone by rollback)")
    add_cuda_source_flags(p)
    add_resolve_flags(p)
    add_assume_flags(p)


def add_cuda_source_flags(p: argparse.ArgumentParser) -> None:
    """Where a release without CUDA wheels (TF 2.0-2.13) gets its CUDA user space."""
    g = p.add_argument_group("CUDA for releases without CUDA wheels (TF <= 2.13)")
    g.add_argument("--conda-channel", metavar="NAME|URL", default=None,
                   help="conda backend: the channel for Python and the cudatoolkit/cudnn packages (default conda-forge)")
    g.add_argument("--cuda-source", choices=("default", "redist"), default="default",
                   help="default: conda packages on the conda backend; redist: NVIDIA's redistributable archives")
    g.add_argument("--cuda-mirror", metavar="URL", help="a mirror of NVIDIA's cuda/redist tree (with --cuda-source redist)")


# --- the pieces before execution ------------------------------------------------------------


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _check_flags(args: argparse.Namespace, ctx: Context) -> None:
    if args.name and args.backend not in (None, "conda"):
        raise UsageError("--name names a conda env", hint="add --backend conda, or use --env PATH for a venv")
    if args.name and args.env:
        raise UsageError("give either --name (a conda env) or --env PATH, not both")
    if args.system_ldconfig and str(ctx.root) == "/" and not _is_root():
        raise EnvironmentProblem(
            "--system-ldconfig edits /etc/ld.so.conf.d and needs root",
            hint="run with sudo (e.g. `sudo -E tfgpu-install ... --system-ldconfig`), or leave the flag out: "
            "activation and the tfgpu-run launcher cover normal use",
            ref="needs-root",
        )


def _python_choice(args: argparse.Namespace, facts: "Facts") -> tuple["Facts", Optional[str]]:
    """--python narrows the interpreters the resolver may pick. Returns (facts, explicit path)."""
    want = args.python
    if not want:
        return facts, None
    if "/" in want:
        path = Path(want).expanduser()
        try:
            usable = path.is_file() and os.access(path, os.X_OK)
        except OSError:  # e.g. EACCES on a directory on the way: as unusable as missing
            usable = False
        if not usable:
            raise EnvironmentProblem(
                f"the interpreter {want} does not exist or is not executable",
                hint="pass --python with a working interpreter path, or a version like 3.11",
                ref="python-missing",
            )
        found = [p for p in facts.pythons if os.path.realpath(p.path) == os.path.realpath(str(path))]
        return (replace(facts, pythons=tuple(found)) if found else facts), str(path)
    found = [p for p in facts.pythons if p.minor == want or p.version == want]
    if not found and args.backend != "conda":
        have = ", ".join(sorted({p.minor for p in facts.pythons})) or "none"
        raise EnvironmentProblem(
            f"no Python {want} interpreter found on this machine (found: {have})",
            hint=f"install Python {want} (e.g. `uv python install {want}` or your distribution's package) "
            "and pass --python PATH, or use --backend conda to let conda provide it",
            ref="python-missing",
        )
    return replace(facts, pythons=tuple(found)), None


def _resolve(args: argparse.Namespace, ctx: Context) -> tuple["Facts", "Knowledge", "Resolution"]:
    from installer.facts.probe import assumptions_from_args, gather
    from installer.knowledge.load import knowledge_dir, load_knowledge, load_policy
    from installer.resolver.resolve import has_usable_gpu, resolve

    assume = assumptions_from_args(args, ctx)
    knowledge = load_knowledge(knowledge_dir(ctx), cache_dir=ctx.cache_dir)
    policy = load_policy(args.profile, knowledge)
    facts = gather(ctx, assume, knowledge)
    facts, _ = _python_choice(args, facts)
    tools = facts.tools
    conda = bool(tools.conda or tools.mamba or tools.micromamba) or args.backend == "conda" or bool(args.name)
    resolution = resolve(
        facts, knowledge, policy,
        allow_cpu=args.allow_cpu, conda_available=conda,
        allow_minor_compat=args.allow_minor_compat, restrict_gpus=args.restrict_gpus,
    )
    if resolution.choice is None:
        if not has_usable_gpu(facts) and not args.allow_cpu:
            why = "; ".join(p.reason for p in facts.problems if p.field in ("gpus", "driver"))[:400]
            raise NoGpuError(
                "no usable NVIDIA GPU found on this machine" + (f" ({why})" if why else ""),
                hint="install or fix the NVIDIA driver (`tfgpu-install probe` shows what was found), or pass "
                "--allow-cpu to provision the same pinned env and verify TensorFlow on the CPU",
            )
        raise UnsatisfiableError(
            "no TensorFlow/CUDA/cuDNN/Python combination fits this machine and profile "
            f"'{resolution.profile}': " + "; ".join(resolution.reasons[-2:]),
            hint="; ".join(resolution.remedies) or "see `tfgpu-install plan` for every rejected candidate",
        )
    return facts, knowledge, resolution


def _options(args: argparse.Namespace, ctx: Context, resolution: "Resolution", facts: "Facts") -> "InstallOptions":
    from installer.plan.options import InstallOptions
    from installer.commands.plan import default_env_path

    choice = resolution.choice
    assert choice is not None
    _, explicit_python = _python_choice(args, facts)
    if args.backend:
        backend = args.backend
    elif args.name:
        backend = "conda"
    else:
        backend = "venv" if (explicit_python or choice.python_path) else "conda"
    if args.name:
        from installer.steps.env import conda_named_env_path

        env = conda_named_env_path(ctx, args.name)
    elif args.env:
        env = Path(os.path.abspath(os.path.expanduser(args.env)))
    else:
        env = default_env_path(ctx, choice)
    return InstallOptions(
        env=env,
        backend=backend,
        name=args.name,
        python=explicit_python or choice.python_path,
        system_ldconfig=args.system_ldconfig,
        seed_pip=bool(getattr(args, "seed_pip", False)),
        shell_rc=Path(os.path.expanduser(args.shell_rc)) if args.shell_rc else None,
        allow_cpu=bool(args.allow_cpu or resolution.cpu_only),
        cudnn_source=args.cudnn_source,
        cudnn_mirror=args.cudnn_mirror,
        cudnn_archive=Path(args.cudnn_archive) if args.cudnn_archive else None,
        cudnn_prefix=Path(args.cudnn_prefix) if args.cudnn_prefix else None,
        quarantine_stale=args.quarantine_stale,
        index_url=args.index_url,
        **_cuda_source_options(args, ctx),
    )


def _cuda_source_options(args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    from installer.knowledge.load import knowledge_dir

    if args.cuda_mirror and args.cuda_source != "redist":
        raise UsageError("--cuda-mirror is only used with --cuda-source redist", "add --cuda-source redist")
    profiles = knowledge_dir(ctx)
    return {
        "conda_channel": args.conda_channel,
        "cuda_source": args.cuda_source,
        "cuda_mirror": args.cuda_mirror,
        "extra": {"profiles_dir": str(profiles)} if profiles else {},
    }


# --- run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.engine.executor import Executor
    from installer.plan.install import build_steps
    from installer.plan.journaled import plan_to_json

    _check_flags(args, ctx)
    facts, _, resolution = _resolve(args, ctx)
    options = _options(args, ctx, resolution, facts)
    steps = build_steps(resolution, options)
    ctx.extra["facts"] = facts
    ex = Executor(ctx, options.env, plan=plan_to_json(resolution, options))

    # Checks first (read-only): the dry run stops here; a complete env needs no confirmation.
    preview = ex.run(steps, dry_run=True)
    pending = [s for s in preview.steps if s.status == "pending"]
    head = _plan_blocks(resolution, options, preview)
    if args.dry_run or not pending:
        results = {"verified_before": _verified_before(ctx, options.env)} if not pending else {}
        return _result(resolution, options, preview, head, dry_run=args.dry_run, ctx_results=results)
    confirm(ctx, args.yes, head)

    from installer.app.envs import remember_env

    progress = None
    if not args.json:
        from installer.console import Progress

        progress = Progress(enabled=True)
        ctx.progress = progress
    try:
        with ex.lock(wait=args.wait):
            remember_env(ctx, options.env)
            _record_rollback_point(ctx, options.env, facts)
            report = ex.run(steps)
    finally:
        if progress is not None:
            progress.close()
    return _result(resolution, options, report, head, dry_run=False, ctx_results=ctx.extra.get("results", {}))


def _record_rollback_point(ctx: Context, env: Path, facts: "Facts") -> None:
    """Before the first change to an env that already exists, keep what it held as a
    `rollback-point` snapshot (`rollback --to ID` returns to it). A resumed run (an interrupted
    step) skips this: its rollback point was taken when it started."""
    from installer.snapshot.envstate import site_packages
    from installer.engine.journal import Journal, step_states

    if site_packages(env) is None:
        return  # a new env: rollback simply removes it
    journal = Journal.for_env(ctx, env)
    if journal.exists() and set(step_states(journal.entries()).values()) & {"interrupted", "failed"}:
        return
    from installer.snapshot.model import save
    from installer.snapshot.build import build

    save(ctx.state_dir, build(ctx, env, "rollback-point", facts=facts, hashes=False))


def _verified_before(ctx: Context, env: Path) -> bool:
    """A complete env: the stored verification said the GPU works."""
    try:
        from installer.verify.host import read_record

        doc = read_record(ctx, env) or {}
    except Exception:
        return False
    report = doc.get("report") or {}
    return bool(report.get("ok") and report.get("gpu_verified", doc.get("gpu_verified")))


# --- the result ---------------------------------------------------------------------------

_MARK = {"done": "done", "unchanged": "unchanged", "applied": "applied", "pending": "to do"}


def _plan_blocks(resolution: "Resolution", options: "InstallOptions", report: "ExecReport") -> list[Block]:
    choice = resolution.choice
    assert choice is not None
    cuda = f"CUDA {choice.cuda}, cuDNN {choice.cudnn}" if choice.cuda else "CPU build"
    blocks: list[Block] = [
        Heading(f"TensorFlow {choice.tensorflow} ({cuda}) on Python {choice.python}"),
        Text(f"env: {options.env} ({options.backend})"),
    ]
    if resolution.cpu_only:
        blocks.append(Text("no usable GPU: TensorFlow will be verified on the CPU (gpu_verified: false)", "warn"))
    if resolution.warnings:
        blocks.append(Bullets("warnings", tuple(resolution.warnings), "warn"))
    blocks.append(table("steps", ("step", "state", "what"),
                        [(s.id, _MARK.get(s.status, s.status), s.describe) for s in report.steps]))
    return blocks


def _gpu_verified(resolution: "Resolution", options: "InstallOptions", results: dict[str, Any]) -> bool:
    if resolution.cpu_only:
        return False
    verify = results.get("verify.run")
    if isinstance(verify, dict) and "gpu_verified" in verify:
        return bool(verify["gpu_verified"])
    return bool(results.get("verified_before"))


def _result(
    resolution: "Resolution",
    options: "InstallOptions",
    report: "ExecReport",
    head: list[Block],
    dry_run: bool,
    ctx_results: Optional[dict[str, Any]] = None,
) -> Result:
    ctx_results = ctx_results or {}
    from installer.plan.options import options_to_json

    blocks = list(head)
    if dry_run:
        pending = sum(1 for s in report.steps if s.status == "pending")
        blocks[-1] = table("steps (dry run: nothing was changed)", ("step", "state", "what"),
                           [(s.id, _MARK.get(s.status, s.status), s.describe) for s in report.steps])
        blocks.append(Text(f"{pending} step(s) would run", "dim"))
    elif report.changed:
        blocks[-1] = table("steps", ("step", "state", "what"),
                           [(s.id, _MARK.get(s.status, s.status), s.describe) for s in report.steps])
        blocks.append(Text(f"done: activate with `. {options.env}/bin/activate`, or run anything through "
                           f"`{options.env}/bin/tfgpu-run`", "ok"))
    else:
        blocks = [Text(f"{options.env} is already installed and verified: nothing to do", "ok")]
    data: dict[str, Any] = {
        "env": str(options.env),
        "dry_run": dry_run,
        "changed": report.changed,
        "resolution": resolution.to_json(),
        "options": options_to_json(options),
        "steps": report.to_json(),
        "gpu_verified": None if dry_run else _gpu_verified(resolution, options, ctx_results),
    }
    return Result(data=data, blocks=blocks, exit_code=int(ExitCode.OK))
