"""`tfgpu-install rollback [--env PATH] [--to SNAPSHOT] [-y]`: the arguments (installer/app/rollback.py
does the work)."""

from __future__ import annotations

import argparse

from installer.commands.common import add_env_flag
from installer.context import Context
from installer.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--to", metavar="SNAPSHOT",
                   help="undo only what happened after this known-good snapshot (id, id prefix or file)")
    p.add_argument("--wait", action="store_true", help="if an install holds this env, wait for it")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.app.rollback import RollbackRequest, rollback

    return rollback(ctx, RollbackRequest(env=args.env, to=args.to, wait=args.wait, yes=args.yes))
