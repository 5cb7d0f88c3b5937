"""The user's own requirements on a TensorFlow env: `install --with/--with-file` and
`tfgpu-install add REQ... [--env E]`.

Before anything changes (also under --dry-run), uv resolves the additions together with the
release's requirements (TensorFlow ==, its CUDA/cuDNN pins, its numpy/protobuf ranges) and,
for `add`, every package the env holds pinned to its installed version: nothing TensorFlow
needs can move. A conflict is refused with exit 4, naming the user's requirement and what
TensorFlow needs. `add` then runs the env's own install plan with the additions (journaled:
`rollback` undoes it), the GPU check runs again (the env's fingerprint changed), and a new
known-good snapshot records them (resolution.added; packages with the rest).

added_requirements(ctx, env) is what `upgrade` carries to the new release."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, DownloadError, TfgpuError, UnsatisfiableError, UsageError
from tfgpu_install.plan import additions
from tfgpu_install.plan.journaled import last_journaled_plan
from tfgpu_install.plan.options import InstallOptions

if TYPE_CHECKING:
    from tfgpu_install.engine.executor import ExecReport
    from tfgpu_install.steps.package_changes import PackageChanges


def added_requirements(ctx: Context, env: Path) -> tuple[str, ...]:
    """The requirements the user added to this env (--with, --with-file, `add`): from the
    newest journaled plan, else the newest known-good snapshot of the env; () when none."""
    plan = last_journaled_plan(ctx, env)
    if plan is not None:
        return additions.recorded(plan.options.with_requirements)
    from tfgpu_install.snapshot.model import latest_for_env

    found = latest_for_env(ctx.state_dir, env)
    return additions.recorded(found[1].resolution.added) if found else ()


def added_hashes(ctx: Context, env: Path) -> dict[str, tuple[str, ...]]:
    """The hashes the user's additions were pinned to (--with-file lines with --hash), from the
    newest journaled plan; {} when none."""
    plan = last_journaled_plan(ctx, env)
    return dict(plan.options.with_hashes) if plan is not None else {}


# --- the resolution check --------------------------------------------------------------------


def check_resolves(ctx: Context, options: InstallOptions, base: Sequence[str], added: Sequence[str],
                   python_version: str, installed: Optional[Mapping[str, str]] = None) -> None:
    """uv resolves base + added (+ installed pinned, as constraints); UnsatisfiableError (exit 4)
    naming both sides when it cannot, DownloadError when the index cannot be read. Reads only."""
    from tfgpu_install.env.tools import find_uv, tool_env
    from tfgpu_install.steps.packages import index_flags, truthy

    if not added:
        return
    uv = find_uv(ctx)
    if uv is None:
        raise TfgpuError("uv is needed to resolve --with/add requirements against TensorFlow's pins and was not found",
                         "reinstall tfgpu-install (it depends on the `uv` package), or unset TFGPU_NO_UV",
                         ref="uv-missing")
    extra = options.extra or {}
    py = ".".join(python_version.split(".")[:2])
    with tempfile.TemporaryDirectory(prefix="tfgpu-with-") as tmp:
        req_in = os.path.join(tmp, "requirements.in")
        Path(req_in).write_text("".join(f"{r}\n" for r in [*base, *added]))
        argv = [uv, "pip", "compile", req_in, "-q", "--no-header", "--python-version", py]
        if installed:
            cons = os.path.join(tmp, "installed.txt")
            Path(cons).write_text("".join(f"{n}=={v}\n" for n, v in sorted(installed.items())))
            argv += ["-c", cons]
        argv += index_flags(ctx, "uv", options.index_url,
                            [u for u in extra.get("extra_index_url", "").split() if u],
                            [u for u in extra.get("find_links", "").split() if u], truthy(extra.get("no_index")))
        done = ctx.runner.run(argv, desc="resolve the added requirements with TensorFlow's pins",
                              env=tool_env(ctx), timeout=600)
    if done.ok:
        return
    text = done.stderr + done.stdout
    if "No solution found" in text or "unsatisfiable" in text:
        raise conflict(base, added, text, installed)
    raise DownloadError("could not resolve the added requirements on the package index: "
                        + _tail(text), "check the index (--index-url, PIP_INDEX_URL/UV_INDEX_URL) is reachable",
                        ref="with-resolve-failed")


def _tail(text: str, n: int = 6) -> str:
    lines = [ln.strip(" ×╰─▶│") for ln in text.strip().splitlines() if ln.strip()]
    return " / ".join(lines[-n:]) or "(no output)"


def conflict(base: Sequence[str], added: Sequence[str], uv_text: str,
             installed: Optional[Mapping[str, str]] = None) -> UnsatisfiableError:
    """The refusal: the user's requirements, what TensorFlow needs that uv's explanation names,
    and uv's explanation itself (escaped by the console like any message)."""
    names = {n.lower() for n in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", uv_text)}

    def named(req: str) -> bool:
        n = additions.name_of(req)
        return n in names or n.replace("-", "_") in names

    theirs = [r for r in added if named(r)] or list(added)
    ours = [r for r in base if named(r)]
    ours += [f"{n}=={v} (installed)" for n, v in sorted((installed or {}).items()) if n in names and
             not any(additions.name_of(b) == n for b in base)]
    return UnsatisfiableError(
        f"{', '.join(theirs)} cannot be installed with this TensorFlow: it needs "
        f"{', '.join(ours) or ', '.join(base[:3])}; uv: {_tail(uv_text, 4)}",
        "loosen or change your requirement so it fits TensorFlow's pins (they cannot move), or pick a "
        "TensorFlow release whose pins fit (`tfgpu-install plan --profile ...`); nothing was changed",
        ref="with-conflict",
    )


# --- `add` -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddRequest:
    requirements: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    env: Optional[str] = None
    yes: bool = False
    dry_run: bool = False
    wait: bool = False
    progress: bool = False


@dataclass(frozen=True)
class AddQuestion:
    """What `add` is about to do, asked before it does (commands/add.py words it)."""

    env: Path
    added: tuple[str, ...]
    preview: ExecReport  # each step's state
    changes: Callable[[], Optional[PackageChanges]]  # uv's dry run: only when shown


@dataclass(frozen=True)
class Added:
    """`add`'s outcome (commands/add.py renders it)."""

    env: Path
    added: tuple[str, ...]
    with_requirements: tuple[str, ...]  # the env's own requirements now
    dry_run: bool
    ran: bool  # False: a dry run, or nothing to do (the env has them)
    changed: bool
    installed: tuple[str, ...]  # name==version, new in the env
    moved: tuple[str, ...]  # "name: old -> new"
    report: ExecReport  # the run's steps (not run: the preview's)
    gpu_verified: Optional[bool]  # the verification this run ran (None: none ran)
    changes: Optional[PackageChanges]  # what the packages step would do (when it is still to do)


def add(ctx: Context, req: AddRequest, ask: Callable[[AddQuestion], None]) -> Added:
    """Add the requirements to the env this tool installed, through its own plan; `ask` is called before
    the first change and stops it by raising."""
    from tfgpu_install.app.envs import target_env
    from tfgpu_install.app.package_plan import planned_changes
    from tfgpu_install.app.provision import ProvisionRequest, provision
    from tfgpu_install.env.target import TargetEnv, env_python_version
    from tfgpu_install.plan.install import build_steps
    from tfgpu_install.plan.journaled import JournaledPlan
    from tfgpu_install.steps.packages import installed_versions

    new, pinned = additions.gather_pinned(req.requirements, req.files)
    if not new:
        raise UsageError("add needs requirements",
                         "e.g. `tfgpu-install add 'pandas>=2' --env ENV`, or --with-file FILE")
    env = target_env(ctx, req.env)
    plan = last_journaled_plan(ctx, env) if env.is_dir() else None
    if plan is None:
        raise BadInputError(f"no install by tfgpu-install is recorded for {env}",
                            "`add` works on envs this tool installed or restored; install one first "
                            "(`tfgpu-install --profile stable --env PATH --with REQ`)", ref="no-plan")
    resolution = plan.resolution
    if resolution.choice is None:
        raise BadInputError(f"the recorded plan of {env} holds no TensorFlow choice", "install the env again",
                            ref="no-plan")
    old = plan.options
    together = additions.merged(old.with_requirements, new)
    options = replace(old, env=env, with_requirements=together,
                      with_hashes=additions.with_pins(ctx, together, old.with_hashes, new, pinned))
    target = TargetEnv.at(env, options.backend, options.name)
    have = installed_versions(target)
    # Everything installed stays where it is, except a requirement the user added before and
    # now replaces (`add 'pandas>=2.2'` after `add pandas`).
    replaced = {additions.name_of(r) for r in old.with_requirements} & {additions.name_of(r) for r in new}
    kept = [r for r in old.with_requirements if additions.name_of(r) not in replaced]
    check_resolves(ctx, options, [*resolution.choice.requirements(), *kept], new,
                   env_python_version(target) or resolution.choice.python,
                   installed={n: v for n, v in have.items() if n not in replaced})
    from tfgpu_install.app.snapshot import _facts
    from tfgpu_install.snapshot.model import known_builds

    facts = _facts(ctx)
    steps = build_steps(resolution, options, facts, expected=known_builds(ctx.state_dir, env))

    done = provision(ctx, ProvisionRequest(
        env=env, steps=steps, plan=JournaledPlan(resolution, options).to_json(),
        ask=lambda preview: ask(AddQuestion(env, tuple(new), preview, lambda: planned_changes(ctx, steps, preview))),
        facts=facts, dry_run=req.dry_run, wait=req.wait, progress=req.progress,
    ))
    report = done.report or done.preview
    after = installed_versions(target)
    moved = sorted(f"{n}: {v} -> {after.get(n)}" for n, v in have.items() if after.get(n) != v)
    verify = dict(done.results).get("verify.run")
    installed = tuple(sorted(f"{n}=={v}" for n, v in after.items() if n not in have))
    return Added(
        env, tuple(new), tuple(options.with_requirements), req.dry_run, done.report is not None,
        bool(done.report and done.report.changed), installed, tuple(moved), report,
        bool(verify.get("gpu_verified")) if isinstance(verify, dict) else None, planned_changes(ctx, steps, report))
