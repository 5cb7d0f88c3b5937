"""`tfgpu-install rollback [--env PATH] [--to SNAPSHOT]`: undo the last install, or go back to
the point where a known-good snapshot was recorded.

Undoes the journal's open entries newest first: files restored byte-identical, the env
removed if the install created it, the ld.so.conf.d entry removed and ldconfig re-run.
A rollback killed half-way resumes when run again.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional

from installer.context import Context
from installer.errors import BadInputError, ExitCode
from installer.report import Result, Text, table
from installer.commands.common import add_env_flag


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--to", metavar="SNAPSHOT",
                   help="undo only what happened after this known-good snapshot (id, id prefix or file)")
    p.add_argument("--wait", action="store_true", help="if an install holds this env, wait for it")


def journal_steps(ctx: Context, entries: list[Any]) -> list[Any]:
    """Every step any journaled run of this env planned (newest plan wins per step id)."""
    from installer.engine.journal import current_epoch
    from installer.plan.journaled import steps_from_plan

    by_id: dict[str, Any] = {}
    for e in current_epoch(entries):
        plan = e.data.get("plan")
        if e.event != "run" or not isinstance(plan, dict) or "resolution" not in plan:
            continue
        if "restore" in plan:  # written by `snapshot restore` (installer/restore.py)
            from installer.plan.restore import steps_from_restore_plan

            steps = steps_from_restore_plan(plan)
        else:
            steps = steps_from_plan(plan)
        for step in steps:
            by_id[step.id] = step
    return list(by_id.values())


def _seq_of_snapshot(ctx: Context, entries: list[Any], ref: str) -> int:
    from installer.engine.journal import current_epoch

    try:
        from installer.snapshot.model import find

        path, snap = find(ctx.state_dir, ref)
        wanted = {str(Path(path).resolve()), snap.id}
    except ImportError:  # pragma: no cover - the snapshot module ships with the tool
        wanted = {ref}
    for e in current_epoch(entries):
        undo = e.data.get("undo") or {}
        if e.event == "done" and e.step == "snapshot.record":
            rec_path = str(Path(str(undo.get("path", ""))).resolve()) if undo.get("path") else ""
            if rec_path in wanted or undo.get("id") in wanted or str(undo.get("id", "")).startswith(ref):
                return int(e.seq)
    raise BadInputError(
        f"snapshot '{ref}' was not recorded by an install of this env (or it was already rolled back)",
        hint="`tfgpu-install snapshot list` shows the snapshots; `tfgpu-install status` shows this env's history; "
        "to rebuild an env from any snapshot use `tfgpu-install snapshot restore`",
    )


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.app.envs import target_env
    from installer.engine.executor import Executor
    from installer.engine.journal import Journal, open_entries

    env = target_env(ctx, args.env)
    journal = Journal.for_env(ctx, env)
    ex = Executor(ctx, env, journal=journal)
    with ex.lock(wait=args.wait):
        entries = journal.entries()
        to_seq: Optional[int] = _seq_of_snapshot(ctx, entries, args.to) if args.to else None
        todo = [e for e in open_entries(entries) if to_seq is None or e.seq > to_seq]
        if not todo:
            return Result(
                data={"env": str(env), "undone": [], "changed": False},
                blocks=[Text(f"nothing to roll back for {env}", "ok")],
            )
        report = ex.rollback(journal_steps(ctx, entries), to_seq=to_seq)
    what = f"back to snapshot {args.to}" if args.to else "back to before the install"
    return Result(
        data={"env": str(env), "to": args.to, "undone": report.to_json(), "changed": True},
        blocks=[
            table(f"rolled back {env} {what}", ("step", "undone"), [(s.id, s.describe) for s in report.steps]),
            Text("rollback complete", "ok"),
        ],
        exit_code=int(ExitCode.OK),
    )
