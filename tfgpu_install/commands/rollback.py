"""`tfgpu-install rollback [--env PATH] [--to SNAPSHOT] [-y]`: the arguments (tfgpu_install/app/rollback.py
does the work)."""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--to", metavar="SNAPSHOT", type=non_empty,
                   help="undo only what happened after this known-good snapshot (id, id prefix or file)")
    p.add_argument("--wait", action="store_true", help="if an install holds this env, wait for it")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.rollback import RollbackRequest, rollback

    return rollback(ctx, RollbackRequest(env=args.env, to=args.to, wait=args.wait, yes=args.yes))
