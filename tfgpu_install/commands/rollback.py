"""`tfgpu-install rollback [--env PATH] [--to SNAPSHOT] [-y]`: the arguments (tfgpu_install/app/rollback.py
does the work)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.report import Block, Heading, Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.app.rollback import Question, RolledBack


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--to", metavar="SNAPSHOT", type=non_empty,
                   help="undo only what happened after this known-good snapshot (id, id prefix or file)")
    p.add_argument("--wait", action="store_true", help="if an install holds this env, wait for it")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.rollback import RollbackRequest, rollback
    from tfgpu_install.commands.confirm import confirm

    def ask(q: "Question") -> None:
        confirm(ctx, args.yes, question(q))

    return rolled_back(rollback(ctx, RollbackRequest(env=args.env, to=args.to, wait=args.wait, yes=args.yes), ask))


def question(q: "Question") -> list[Block]:
    what = f"back to snapshot {q.to}" if q.to else "back to before the install"
    blocks: list[Block] = [Heading(f"roll back {q.env} {what}: {q.steps} step(s) to undo")]
    if q.removes_env:
        blocks.append(Text(f"this removes the env {q.env} and everything installed in it", "warn"))
    return blocks


def rolled_back(done: "RolledBack") -> Result:
    env, report = done.env, done.undone
    if report is None:
        return Result(data={"env": str(env), "undone": [], "changed": False},
                      blocks=[Text(f"nothing to roll back for {env}", "ok")])
    what = f"back to snapshot {done.to}" if done.to else "back to before the install"
    return Result(
        data={"env": str(env), "to": done.to, "undone": report.to_json(), "changed": True},
        blocks=[
            table(f"rolled back {env} {what}", ("step", "undone"), [(s.id, s.describe) for s in report.steps]),
            Text("rollback complete", "ok"),
        ],
        exit_code=int(ExitCode.OK),
    )
