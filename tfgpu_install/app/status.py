"""`status`: the env's steps (done, pending, interrupted) and its last verification, as data
(commands/status.py renders it). Read-only: it runs each step's check(), never apply()."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.verification import BadRecord, RecordedPlan, RecordedReport, read_record
from tfgpu_install.errors import TfgpuError
from tfgpu_install.guard.jsondoc import JSONObject


def _verification(ctx: Context, env: Any) -> JSONObject | None:
    try:
        doc = read_record(ctx, env)
    except BadRecord as exc:  # an unreadable record is reported, not fatal
        return {"ok": False, "summary": f"unreadable verification record: {exc}"}
    if doc is None or doc.empty:
        return None
    report = doc.report or RecordedReport(raw={})
    plan = doc.plan or RecordedPlan()
    return {
        "ok": bool(report.ok),
        "gpu_verified": bool(report.gpu_verified),
        "when": report.when,
        "summary": report.summary,
        "mode": report.mode,
        # The names of the layers that passed (a fleet row shows them beside GPU / CPU only).
        "layers_passed": list(report.layers_passed),
        # The stack that verification checked (the last good state when ok: a later failed attempt
        # that never reached verification does not change it).
        "tensorflow": plan.tensorflow, "cuda": plan.cuda, "cudnn": plan.cudnn,
    }


@dataclass(frozen=True)
class StepState:
    id: str
    state: str  # what check() says now: done | unchanged | pending | interrupted | failed | problem: ...
    journal: str  # what the journal says ("-": nothing)
    describe: str


@dataclass(frozen=True)
class Status:
    env: Path
    installed: bool  # a run of this tool is journaled for it
    steps: tuple[StepState, ...] = ()
    verification: Optional[JSONObject] = None  # the last verification, as `status --json` shows it

    @property
    def complete(self) -> bool:
        return bool(self.steps) and all(s.state in ("done", "unchanged") for s in self.steps)


def status(ctx: Context, env_given: Optional[str]) -> Status:
    """The env's steps (done, pending, interrupted) and its last verification; read-only."""
    from tfgpu_install.app.envs import existing_env
    from tfgpu_install.app.rollback import journal_steps
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.env.journal import Journal, step_states

    env = existing_env(ctx, env_given)  # none, or gone: exit 6 (env-not-found), as every command says it
    journal = Journal.for_env(ctx, env)
    entries = journal.entries()
    if not entries:
        return Status(env, installed=False)
    states = step_states(entries)
    rows: list[StepState] = []
    ex = Executor(ctx, env, journal=journal)
    for step in journal_steps(ctx, entries):
        try:
            live = ex.preview(step).status  # done | unchanged | pending
        except TfgpuError as err:
            live = f"problem: {err.message}"
        journaled = states.get(step.id, "-")
        if journaled in ("interrupted", "failed") and live != "done":
            live = journaled
        rows.append(StepState(step.id, live, journaled, step.describe()))
    return Status(env, True, tuple(rows), _verification(ctx, env))
