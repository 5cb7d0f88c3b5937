"""`tfgpu-install add REQ... [--with-file FILE] [--env E]`: the arguments (app/additions.py
does the work). Exit 4 when a requirement conflicts with TensorFlow's pins (nothing changed)."""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.report import Result


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

    return add(ctx, AddRequest(requirements=tuple(args.requirements), files=tuple(args.with_files), env=args.env,
                               yes=args.yes, dry_run=args.dry_run, wait=args.wait, progress=not args.json))
