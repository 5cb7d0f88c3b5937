"""`tfgpu-install self uninstall [--envs] [--uv-cache] [-y] [--dry-run]`: the arguments
(tfgpu_install/app/uninstall.py does the work)."""

from __future__ import annotations

import argparse

from tfgpu_install.context import Context
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="self_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    un = sub.add_parser("uninstall", help="remove the tool's state, cache and data (sizes shown first)")
    un.add_argument("--envs", action="store_true", help="also remove every env tfgpu-install made")
    un.add_argument("--uv-cache", action="store_true",
                    help="also remove your uv cache (shared with your other uv projects; kept by default)")
    un.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    un.add_argument("--dry-run", action="store_true", help="list what would go, with sizes; change nothing")
    un.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    un.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.uninstall import UninstallRequest, uninstall

    return uninstall(ctx, UninstallRequest(envs=args.envs, uv_cache=args.uv_cache, yes=args.yes,
                                           dry_run=args.dry_run))
