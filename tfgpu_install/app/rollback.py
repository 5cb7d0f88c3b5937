"""`rollback`: undo the last install (or restore), or go back to the point where a known-good
snapshot was recorded.

Undoes the journal's open entries newest first: files restored byte-identical, the env
removed if the install created it, the ld.so.conf.d entry removed and ldconfig re-run.
A rollback killed half-way resumes when run again. It asks first (it may delete a
multi-GB env); -y skips the question.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError
from tfgpu_install.guard.jsondoc import obj, text

if TYPE_CHECKING:
    from tfgpu_install.engine.executor import ExecReport
    from tfgpu_install.steps.base import Step


@dataclass(frozen=True)
class RollbackRequest:
    env: Optional[str] = None  # None: the last env installed
    to: Optional[str] = None  # a known-good snapshot (id, id prefix or file)
    wait: bool = False
    yes: bool = False  # no question (the command asks it: commands/rollback.py)


def journal_steps(ctx: Context, entries: list[Any]) -> list[Step]:
    """Every step any journaled run of this env planned (newest plan wins per step id)."""
    from tfgpu_install.env.journal import current_epoch
    from tfgpu_install.plan.journaled import read_plan

    by_id: dict[str, Step] = {}
    for e in current_epoch(entries):
        plan = read_plan(e.data.get("plan")) if e.event == "run" else None
        if plan is None:
            continue
        for step in plan.steps():  # a restore's and a kernel install's plan too (plan/journaled.py)
            by_id[step.id] = step
    return list(by_id.values())


def _seq_of_snapshot(ctx: Context, entries: list[Any], ref: str) -> int:
    from tfgpu_install.env.journal import current_epoch
    from tfgpu_install.snapshot.model import find

    path, snap = find(ctx.state_dir, ref)
    wanted = {str(Path(path).resolve()), snap.id}
    for e in current_epoch(entries):
        undo = obj(e.data, "undo")
        if e.event == "done" and e.step == "snapshot.record":
            rec_path = str(Path(str(undo.get("path", ""))).resolve()) if undo.get("path") else ""
            rec_id = text(undo, "id")
            if rec_path in wanted or rec_id in wanted or str(undo.get("id", "")).startswith(ref):
                return int(e.seq)
    raise BadInputError(
        f"snapshot '{ref}' was not recorded by an install of this env (or it was already rolled back)",
        hint="`tfgpu-install snapshot list` shows the snapshots; `tfgpu-install status` shows this env's history; "
        "to rebuild an env from any snapshot use `tfgpu-install snapshot restore`",
    )


@dataclass(frozen=True)
class Question:
    """What a rollback is about to undo, asked before it does (commands/rollback.py words it)."""

    env: Path
    to: Optional[str]
    steps: int  # journaled changes to undo
    removes_env: bool  # the env itself goes (this tool created it)


@dataclass(frozen=True)
class RolledBack:
    """`rollback`'s outcome: the steps undone (None: there was nothing to roll back)."""

    env: Path
    to: Optional[str]
    undone: Optional[ExecReport]


def rollback(ctx: Context, req: RollbackRequest, ask: Callable[[Question], None]) -> RolledBack:
    """Undo the env's journaled changes (after the snapshot `req.to`); `ask` is called first and stops it by
    raising (commands/rollback.py: the question on the terminal, or -y)."""
    from tfgpu_install.app.envs import target_env
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.env.journal import Journal, open_entries

    env = target_env(ctx, req.env)
    journal = Journal.for_env(ctx, env)
    ex = Executor(ctx, env, journal=journal)
    with ex.lock(wait=req.wait):
        entries = journal.entries()
        to_seq: Optional[int] = _seq_of_snapshot(ctx, entries, req.to) if req.to else None
        todo = [e for e in open_entries(entries) if to_seq is None or e.seq > to_seq]
        if not todo:
            return RolledBack(env, req.to, None)
        ask(Question(env, req.to, len(todo), _creates_env(todo)))
        report = ex.rollback(journal_steps(ctx, entries), to_seq=to_seq)
    if to_seq is None or not env.exists():  # no longer one of ours: the default env moves on
        from tfgpu_install.env.registry import forget_env

        forget_env(ctx, env)
    return RolledBack(env, req.to, report)


def _creates_env(todo: list[Any]) -> bool:
    return any(e.event == "done" and e.step == "env.create" and (e.data.get("undo") or {}).get("created")
               for e in todo)
