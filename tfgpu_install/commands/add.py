"""`tfgpu-install add REQ... [--with-file FILE] [--env E]`: the arguments (app/additions.py
does the work). Exit 4 when a requirement conflicts with TensorFlow's pins (nothing changed)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Optional

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.app.additions import Added, AddQuestion
    from tfgpu_install.engine.executor import ExecReport
    from tfgpu_install.steps.package_changes import PackageChanges


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("requirements", metavar="REQ", nargs="*", type=non_empty,
                   help="requirements to add, e.g. 'pandas>=2' (names and version ranges)")
    p.add_argument("--with-file", dest="with_files", metavar="FILE", action="append", default=[], type=non_empty,
                   help="requirements from a requirements.txt, pylock.toml or pyproject.toml ([project] dependencies)")
    add_env_flag(p)
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--dry-run", action="store_true", help="resolve and show the steps; change nothing")
    p.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it instead of failing")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.additions import AddRequest, add
    from tfgpu_install.commands.confirm import confirm

    def ask(q: "AddQuestion") -> None:
        confirm(ctx, args.yes, lambda: head(q.env, q.added, q.preview, q.changes()))

    return added(add(ctx, AddRequest(requirements=tuple(args.requirements), files=tuple(args.with_files),
                                     env=args.env, yes=args.yes, dry_run=args.dry_run, wait=args.wait,
                                     progress=not args.json), ask))


def head(env: object, new: tuple[str, ...], report: "ExecReport", changes: Optional["PackageChanges"]) -> list[Block]:
    """The steps, and every package it adds, changes or removes, with versions, while the packages step is to do."""
    from tfgpu_install.commands.package_plan import package_blocks

    return [Heading(f"add {', '.join(new)} to {env}"),
            table("steps", ("step", "state", "what"), [(s.id, s.status, s.describe) for s in report.steps]),
            *package_blocks(changes)]


def added(done: "Added") -> Result:
    data = {
        "env": str(done.env), "dry_run": done.dry_run, "added": list(done.added),
        "with_requirements": list(done.with_requirements), "changed": done.changed,
        "installed": list(done.installed), "moved": list(done.moved), "steps": done.report.to_json(),
        "gpu_verified": done.gpu_verified,
    }
    blocks = head(done.env, done.added, done.report, done.changes)
    if done.dry_run:
        if done.changes is not None:
            data["packages"] = done.changes.to_json()
        blocks.append(Text("dry run: nothing was changed", "dim"))
    elif not done.ran:
        blocks.append(Text(f"{done.env} already has {', '.join(done.added)}: nothing to do", "ok"))
    else:
        blocks.append(Bullets("installed", done.installed or ("(already there)",), "ok"))
        blocks.append(Text("verified again after the add; recorded in a new known-good snapshot", "ok"))
    return Result(data, blocks)
