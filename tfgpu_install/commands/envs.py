"""`tfgpu-install envs [list] [--all]`, `envs remove PATH [-y] [--dry-run]`, `envs default PATH`:
the arguments (tfgpu_install/app/env_list.py and env_remove.py do the work)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Optional

from tfgpu_install.commands.common import non_empty
from tfgpu_install.context import Context
from tfgpu_install.guard.envpath import env_path_arg
from tfgpu_install.report import Block, Heading, Result, Text, human_bytes, table

if TYPE_CHECKING:
    from tfgpu_install.app.env_list import DefaultSet, EnvList, EnvRow
    from tfgpu_install.app.env_remove import EnvRemoved, Removal
    from tfgpu_install.env.disksize import TreeUsage


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
        from tfgpu_install.commands.confirm import confirm

        def ask(removal: "Removal") -> None:
            confirm(ctx, args.yes, removal_blocks(removal))

        return env_removed(remove_env(ctx, RemoveRequest(env=args.path, yes=args.yes, wait=args.wait,
                                                         dry_run=args.dry_run), ask))
    if args.envs_command == "default":
        from tfgpu_install.app.env_list import set_default

        return default_set(ctx, set_default(ctx, args.path))
    from tfgpu_install.app.env_list import list_envs

    return listed(list_envs(ctx, include_missing=bool(getattr(args, "all", False))))


def _kept(size: "TreeUsage") -> str:
    return f"; {human_bytes(size.shared)} it shares with uv's cache or other envs stays" if size.shared else ""


def removal_blocks(removal: "Removal") -> list[Block]:
    """What removing the env means: the question `envs remove` asks, and its dry run's answer."""
    env, size = removal.env, removal.size
    return [
        Heading(f"remove {env}: frees {human_bytes(size.own)}{_kept(size)}; {removal.steps} journaled change(s) "
                "to undo"),
        Text("the env, everything installed in it and its activation (shell rc block, ld.so.conf.d entry) go; "
             "its snapshots stay (`tfgpu-install snapshot restore` rebuilds it)", "warn"),
    ]


def env_removed(done: "EnvRemoved") -> Result:
    env, size = done.removal.env, done.removal.size
    data = {"env": str(env), "size_bytes": size.total, "own_bytes": size.own, "shared_bytes": size.shared,
            "dry_run": done.dry_run}
    report = done.undone
    if report is None:
        return Result(data={**data, "removed": False, "undone": []}, blocks=removal_blocks(done.removal))
    return Result(
        data={**data, "removed": done.gone, "undone": report.to_json(), "was_default": done.was_default,
              "freed_bytes": done.freed},
        blocks=[table(f"removed {env}", ("step", "undone"), [(s.id, s.describe) for s in report.steps]),
                Text(f"{env} removed: {human_bytes(done.freed)} freed{_kept(size)}" if done.gone
                     else f"{env} is still there ({human_bytes(done.freed)} freed)", "ok" if done.gone else "warn")],
    )


def _state(r: "EnvRow") -> str:
    if r.incomplete:
        return " (incomplete)" if r.exists else " (incomplete, not created yet)"
    return "" if r.exists else " (gone)"


def _size(r: "EnvRow") -> Optional[str]:
    """An env's size as removing it would see it: its own bytes, then what it shares (uv's cache, other envs)."""
    if not r.exists:
        return None
    return human_bytes(r.own_bytes) + (f" + {human_bytes(r.shared_bytes)} shared" if r.shared_bytes else "")


def _verified(r: "EnvRow") -> str:
    if r.verified is None:
        return "never"
    return f"{r.verified} ({'passed' if r.verified_ok else 'FAILED' if r.verified_ok is False else '?'})"


def listed(found: "EnvList") -> Result:
    rows = found.rows
    data = {"envs": [r.to_json() for r in rows], "total_bytes": found.total_bytes}
    if not rows:
        return Result(data=data, blocks=[Text("no envs yet: tfgpu-install --profile stable makes one", "warn")])
    blocks: list[Block] = [table(
        "environments made by tfgpu-install (* = the default)",
        ("", "path", "TF", "CUDA", "cuDNN", "Python", "last verified", "drift", "size"),
        [("*" if r.default else "", r.path + _state(r), r.tensorflow, r.cuda, r.cudnn,
          r.python, _verified(r), r.drift, _size(r)) for r in rows],
    )]
    stopped = [r for r in rows if r.incomplete]
    if stopped:
        blocks.append(Text(f"incomplete: {', '.join(r.path for r in stopped)}: a run stopped before the env was "
                           "verified; run the same command again to finish it, or `tfgpu-install envs remove PATH`",
                           "warn"))
    blocks.append(Text(f"{len(rows)} env(s), {human_bytes(found.total_bytes)} on disk together (each file once); "
                       "an env's size is its own bytes (what removing it frees) + what it shares with uv's cache or "
                       "other envs; remove one with `tfgpu-install envs remove PATH`", "dim"))
    return Result(data=data, blocks=blocks)


def default_set(ctx: Context, done: "DefaultSet") -> Result:
    from tfgpu_install.guard.shellquote import command

    env, before = done.env, done.previous
    blocks: list[Block] = [Text(f"{env} is the default env now" + ("" if before is None or before == env
                                                                   else f" (was {before})"), "ok")]
    if not done.verified_ok:
        again = command(ctx, "tfgpu-install", "verify", "--env", str(env))
        blocks.append(Text(f"its last verification did not pass: `{again}` checks it", "warn"))
    return Result(data={"env": str(env), "default": True, "previous": str(before) if before else None,
                        "verified_ok": done.verified_ok}, blocks=blocks)
