"""One provisioning path for `install` and `snapshot restore`.

    preview (every step's check, read-only) -> [dry run / nothing to do: stop]
    -> confirm -> env lock -> rollback point -> run the steps (journaled)
    -> [make_default: the env is the default now (env/registry.py)]

Install and restore differ only in the steps they hand in (a resolution's, or a snapshot's
pinned ones) and in what a failed run leaves: an install stays resumable (run it again), a
restore is undone at once (`undo_on_failure`), so a refused package never leaves a half-env.
The default env moves only once every step ran, the verification included (`make_default`:
install, upgrade and restore; not `add` or `kernel install`): a run killed or failed at any
step leaves the default where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport, Executor
from tfgpu_install.env.journal import Journal, step_states
from tfgpu_install.env.registry import remember_env
from tfgpu_install.errors import TfgpuError, VerifyFailed
from tfgpu_install.snapshot.envstate import site_packages
from tfgpu_install.steps.base import Step


@dataclass(frozen=True)
class ProvisionRequest:
    env: Path
    steps: Sequence[Step]
    plan: Mapping[str, object]  # the journaled plan: rollback rebuilds the same steps from it
    # Asked before the first change, given the preview (each step's state): it stops the run by raising
    # (the question on the terminal, commands/confirm.py; or nothing to ask: -y, a kernel's registration).
    ask: Callable[[ExecReport], None]
    facts: Any = None  # the probe's Facts, recorded by the snapshot step
    dry_run: bool = False
    wait: bool = False  # queue behind another run on the same env instead of exit 10
    progress: bool = False  # live progress on the terminal (never under --json)
    undo_on_failure: bool = False
    make_default: bool = False  # a run that ends verified makes the env the default (install, restore)


@dataclass(frozen=True)
class Provisioned:
    preview: ExecReport  # every step's state before anything ran
    report: Optional[ExecReport]  # None: dry run, or nothing was pending
    results: Mapping[str, Any] = field(default_factory=dict)  # step id -> its record, this run
    rollback_point: Optional[str] = None  # the snapshot id recorded before the first change

    @property
    def pending(self) -> bool:
        return any(s.status == "pending" for s in self.preview.steps)


def provision(ctx: Context, req: ProvisionRequest) -> Provisioned:
    from tfgpu_install.guard.argtypes import check_tool_dirs
    from tfgpu_install.guard.envpath import check_env_path

    check_env_path(req.env)  # exit 5 before the preview: a path no loader or shell can carry
    check_tool_dirs(ctx.state_dir, ctx.cache_dir, ctx.data_dir)  # exit 5, also in a dry run
    ex = Executor(ctx, req.env, plan=req.plan)
    preview = ex.run(req.steps, dry_run=True)
    pending = {s.id for s in preview.steps if s.status == "pending"}
    for step in req.steps:  # what the steps to run will need (a conda engine): the dry run fails as the run would
        if step.id in pending:
            step.preflight(ctx)
    if req.dry_run:
        return Provisioned(preview, None)
    if not any(s.status == "pending" for s in preview.steps):
        ex.mark_finished()  # a run killed after its last step: every check passes, so it ended
        return Provisioned(preview, None)
    req.ask(preview)
    progress = None
    if req.progress:
        from tfgpu_install.console import Progress  # the console is the only printer

        progress = Progress(enabled=True)
        ex = Executor(replace(ctx, progress=progress), req.env, plan=req.plan)
    try:
        with ex.lock(wait=req.wait):
            entries = ex.journal.entries()
            before = entries[-1].seq if entries else 0
            point = _rollback_point(ctx, req.env, req.facts)
            try:
                report = ex.run(req.steps)
            except VerifyFailed:
                raise  # provisioned but not working: left in place for `doctor` or `rollback`
            except TfgpuError as err:
                if not req.undo_on_failure:
                    raise  # resumable: the journal says where it stopped
                try:
                    ex.rollback(req.steps, to_seq=before)
                except TfgpuError:
                    raise err from None  # the journal still holds it: `tfgpu-install rollback` finishes the undo
                raise undone(err, req.env) from err
            if req.make_default:  # every step ran, the verification too (VerifyFailed did not get here)
                remember_env(ctx, req.env)
    finally:
        if progress is not None:
            progress.close()
    return Provisioned(preview, report, dict(report.results), point)


def _rollback_point(ctx: Context, env: Path, facts: Any) -> Optional[str]:
    """Before the first change to an env that already exists, keep what it held as a
    `rollback-point` snapshot (`rollback --to ID` / `snapshot restore ID` return to it).
    A new env needs none (rollback removes it); a resumed run took its point when it started."""
    if site_packages(env) is None:
        return None
    journal = Journal.for_env(ctx, env)
    if journal.exists() and set(step_states(journal.entries()).values()) & {"interrupted", "failed"}:
        return None
    from tfgpu_install.plan.journaled import recorded_plan
    from tfgpu_install.snapshot.build import build
    from tfgpu_install.snapshot.model import save

    snap = build(ctx, env, "rollback-point", facts=facts, resolution=recorded_plan(ctx, env), hashes=False)
    save(ctx.state_dir, snap)
    return snap.id


def undone(err: TfgpuError, env: Path) -> TfgpuError:
    """The same error, saying the partial run was undone."""
    tail = f" (the run was undone: {env} is as it was before)"
    try:
        return type(err)(err.message + tail, err.hint, ref=err.ref, code=err.code)
    except TypeError:  # a subclass with its own constructor: keep it as it is
        return err
