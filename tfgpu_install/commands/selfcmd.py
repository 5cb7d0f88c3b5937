"""`tfgpu-install self uninstall [--envs] [--uv-cache] [-y] [--dry-run]`: the arguments
(tfgpu_install/app/uninstall.py does the work)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.context import Context
from tfgpu_install.report import Block, Heading, Result, Text, human_bytes, table

if TYPE_CHECKING:
    from tfgpu_install.app.uninstall import Uninstall, Uninstalled


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
    from tfgpu_install.commands.confirm import confirm

    def ask(plan: "Uninstall") -> None:
        confirm(ctx, args.yes, plan_blocks(plan))

    return uninstalled(uninstall(ctx, UninstallRequest(envs=args.envs, uv_cache=args.uv_cache, yes=args.yes,
                                                       dry_run=args.dry_run), ask))


def plan_blocks(plan: "Uninstall") -> list[Block]:
    """What goes and what stays, shown before the confirmation."""
    blocks: list[Block] = [Heading(f"uninstall tfgpu-install: {human_bytes(plan.total)} to free")]
    listed = [(t.what, str(t.path), human_bytes(t.size) if t.size else "-") for t in plan.targets]
    if plan.envs:
        listed += [("env (through its journal)", r.path, human_bytes(r.own_bytes)) for r in plan.made]
    blocks.append(table("what goes", ("what", "path", "size"), listed))
    if plan.kept:
        blocks.append(Text(f"kept: {len(plan.kept)} env(s), {human_bytes(sum(r.size_bytes for r in plan.kept))} "
                           + ("(not made by tfgpu-install)" if plan.envs else "(pass --envs to remove them too)"),
                           "warn"))
    if not plan.uv_cache:
        blocks.append(Text("kept: your uv cache (pass --uv-cache to remove it too)", "dim"))
    return blocks


def uninstalled(done: "Uninstalled") -> Result:
    plan = done.plan
    data = {
        "dry_run": done.dry_run, "total_bytes": plan.total,
        "remove": [{"what": t.what, "path": str(t.path), "size_bytes": t.size} for t in plan.targets],
        "envs": [r.path for r in plan.made] if plan.envs else [], "kept_envs": [r.path for r in plan.kept],
    }
    if done.removed is None:
        blocks: list[Block] = [Text("nothing of tfgpu-install's is here", "ok")] if plan.nothing else plan_blocks(plan)
        return Result(data={**data, "removed": []}, blocks=blocks)
    return Result(data={**data, "removed": list(done.removed)}, blocks=[
        Text(f"tfgpu-install uninstalled: {len(done.removed)} path(s) removed, {human_bytes(plan.total)} freed",
             "ok"),
        Text("installed with pip, pipx or `uv tool`? remove the package itself the same way "
             "(`pipx uninstall tfgpu-install`, `uv tool uninstall tfgpu-install`)", "dim"),
    ])
