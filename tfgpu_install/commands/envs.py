"""`tfgpu-install envs [list] [--all]`, `envs remove PATH [-y] [--dry-run]`, `envs default PATH`:
the arguments (tfgpu_install/app/env_list.py and env_remove.py do the work)."""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import non_empty
from tfgpu_install.context import Context
from tfgpu_install.guard.envpath import env_path_arg
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="also envs whose directory is gone")
    sub = p.add_subparsers(dest="envs_command", metavar="ACTION", parser_class=type(p))
    ls = sub.add_parser("list", help="the envs tfgpu-install made (the default action)")
    ls.add_argument("--all", action="store_true", help="also envs whose directory is gone")
    rm = sub.add_parser("remove", help="remove an env tfgpu-install made, through its journal (as rollback does)")
    rm.add_argument("path", metavar="PATH", type=non_empty, help="the env's directory (see `tfgpu-install envs`)")
    rm.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    rm.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    rm.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it")
    de = sub.add_parser("default", help="make PATH the default env (what commands without --env act on)")
    de.add_argument("path", metavar="PATH", type=env_path_arg, help="one of the envs `tfgpu-install envs` lists")
    for sp in (ls, rm, de):
        sp.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
        sp.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    if args.envs_command == "remove":
        from tfgpu_install.app.env_remove import RemoveRequest, remove_env

        return remove_env(ctx, RemoveRequest(env=args.path, yes=args.yes, wait=args.wait, dry_run=args.dry_run))
    if args.envs_command == "default":
        from tfgpu_install.app.env_list import set_default

        return set_default(ctx, args.path)
    from tfgpu_install.app.env_list import list_envs

    return list_envs(ctx, include_missing=bool(getattr(args, "all", False)))
