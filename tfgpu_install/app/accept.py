"""`accept [--env E]`: the env as it is now becomes its new known-good, once it has earned it.

A `pip install` into an env (one the tool itself suggests) is drift: `check` exits 11 against the last
known-good snapshot. `accept` is how a user says "this is my env now": it refuses an env whose installed
files no longer match their distributions' records or whose activation files the tool wrote were changed
(those are damage, not a choice: the install repairs them), runs the full verification on the env as it
is (never a stored result), and only when that passes records a new known-good snapshot through the
env's journal (`rollback` undoes it; the previous known-good stays in the snapshot history and
`snapshot restore ID` returns to it). What the new record accepted is listed: the drift from the old one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode, TfgpuError
from tfgpu_install.guard.shellquote import command

if TYPE_CHECKING:
    from tfgpu_install.plan.journaled import JournaledPlan
    from tfgpu_install.verify.host import VerifyReport


@dataclass(frozen=True)
class AcceptRequest:
    env: Optional[str] = None  # None: the default env
    timeout: Optional[float] = None  # the verification's, as `verify --timeout`
    wait: bool = False  # queue behind another run on the env instead of exit 10


def not_acceptable(ctx: Context, env: Path, lines: list[str]) -> TfgpuError:
    """Damage is not a choice to accept (exit 11, as `check` reports it)."""
    shown = "; ".join(lines[:3]) + ("; ..." if len(lines) > 3 else "")
    return TfgpuError(
        f"not accepted: {env} is damaged, not only changed: {shown}",
        f"run the same install again (it repairs the damaged files), then accept; "
        f"`{command(ctx, 'tfgpu-install', 'check', '--env', str(env))}` lists them",
        ref="accept-damaged", code=ExitCode.DRIFT,
    )


@dataclass(frozen=True)
class Accepted:
    """What `accept` did (commands/accept.py renders it): the verification run now; accepted or not; the
    known-good snapshot before (kept when refused) and the one recorded now (None: refused, or none
    found); what changed between them (now accepted), as lines and as the drift's JSON."""

    env: Path
    report: "VerifyReport"
    accepted: bool
    previous: Optional[str]  # its id
    new: Optional[str] = None  # its id
    changes: tuple[str, ...] = ()
    drift: dict[str, object] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        """Nothing changed since the known-good: the same snapshot stands."""
        return self.previous is not None and self.new is not None and self.previous == self.new


def accept(ctx: Context, req: AcceptRequest) -> Accepted:
    from tfgpu_install.app.envs import existing_env
    from tfgpu_install.app.snapshot import _facts, installed_files, own_files_changed
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.plan.journaled import last_journaled_plan
    from tfgpu_install.snapshot import model as snap_mod

    env = existing_env(ctx, req.env)
    files = installed_files(ctx, env)
    damage = list(files.lines()) + [f"tool file changed: {o}" for o in own_files_changed(ctx, env)]
    if damage:
        raise not_acceptable(ctx, env, damage)
    store = snap_mod.scan(ctx.state_dir)
    previous = snap_mod.latest_for_env(ctx.state_dir, env, store=store)
    facts = _facts(ctx)
    plan = last_journaled_plan(ctx, env)
    ex = Executor(ctx, env, plan=plan.to_json() if plan is not None else {})
    with ex.lock(wait=req.wait):
        report, check_plan = _verify(ctx, env, req.timeout)
        if not report.ok:
            return Accepted(env, report, False, previous[1].id if previous else None)
        new = _record(ctx, ex, env, plan, check_plan.cpu_only, facts)
    return _accepted(env, report, previous[1] if previous else None, new)


def _verify(ctx: Context, env: Path, timeout: Optional[float]) -> tuple[Any, Any]:
    """The env's whole verification, run now (as `verify` runs it), its record written."""
    from tfgpu_install.env.verification import BadRecord, read_record, write_record
    from tfgpu_install.verify.host import CheckPlan, plan_from_env, run_verification, verify_fingerprint

    try:
        record = read_record(ctx, env) if (env / "bin" / "python").exists() else None
    except BadRecord:
        record = None  # an unreadable record vouches for nothing; the plan comes from the env itself
    plan = CheckPlan.from_record(record.plan) if record and record.plan else plan_from_env(env)
    report = run_verification(ctx, env, plan, timeout=timeout)
    write_record(ctx, env, report, verify_fingerprint(ctx, env, plan), plan)
    return report, plan


def _record(ctx: Context, ex: Any, env: Path, plan: Optional["JournaledPlan"], cpu_only: bool, facts: Any) -> Any:
    """The new known-good snapshot. Through the journal when the env has one (rollback undoes it, and the
    install's own snapshot step sees it as done for this state of the env); else written directly."""
    from tfgpu_install.plan.journaled import recorded_plan
    from tfgpu_install.snapshot import model as snap_mod
    from tfgpu_install.snapshot.record import RecordSnapshot

    backend = "conda" if (env / "conda-meta").is_dir() else "venv"
    step = RecordSnapshot(env, backend, resolution=recorded_plan(ctx, env), cpu_only=cpu_only, facts=facts)
    if plan is not None:
        done = ex.run([step])
        record = done.results.get(step.id)
    else:
        record = step.apply(ctx)
    if isinstance(record, dict) and record.get("path"):
        return snap_mod.load(Path(str(record["path"])))
    # the journal's fingerprint said the env has not changed since its last record: that record stands
    found = snap_mod.latest_for_env(ctx.state_dir, env)
    return found[1] if found else None


def _accepted(env: Path, report: "VerifyReport", previous: Any, new: Any) -> Accepted:
    from tfgpu_install.snapshot.drift import compare, to_jsonable

    if previous is not None and new is not None and previous.id != new.id:
        d = compare((previous.packages, new.packages), (previous.files, new.files),
                    (previous.activation, new.activation), None)
        changes, drift = tuple(d.lines()), to_jsonable(d)
    else:
        changes, drift = (), {}
    return Accepted(env, report, True, previous.id if previous else None, new.id if new else None, changes, drift)
