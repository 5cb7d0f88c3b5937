"""`tfgpu-install upgrade [--env OLD] [--to NEW] [--profile P]`: the arguments (tfgpu_install/app/upgrade.py
does the work); the env-shaping flags, the question and the screen are install's own, with what the upgrade
carried over, left out and made the default."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_assume_flags, non_empty
from tfgpu_install.context import Context
from tfgpu_install.guard.shellquote import command
from tfgpu_install.report import Block, Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.upgrade import NotCarried, Upgraded


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tfgpu_install.commands.plan import add_resolve_flags

    p.add_argument("--env", metavar="PATH", type=non_empty, help="the env to upgrade (default: the default env)")
    p.add_argument("--to", metavar="PATH", type=non_empty,
                   help="where the new env goes (default: under the data dir, named after the new combination)")
    p.add_argument("--profile", default=None, type=non_empty,
                   help="the profile to upgrade to (default: the one the env was installed with)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--dry-run", action="store_true", help="show the plan; change nothing")
    p.add_argument("--python", metavar="X.Y|PATH", type=non_empty, help="the Python for the new env")
    p.add_argument("--index-url", metavar="URL", help="package index (default: PIP_INDEX_URL / UV_INDEX_URL / PyPI)")
    p.add_argument("--no-pip", dest="seed_pip", action="store_false", default=True, help="no pip in the new env")
    add_resolve_flags(p)
    add_assume_flags(p)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.install import InstallRequest
    from tfgpu_install.app.resolution import ResolveRequest
    from tfgpu_install.app.upgrade import UpgradeRequest, upgrade
    from tfgpu_install.commands.common import assume_flags
    from tfgpu_install.commands.install import asker

    template = InstallRequest(
        resolve=ResolveRequest(
            assume=assume_flags(args), allow_cpu=args.allow_cpu, allow_minor_compat=args.allow_minor_compat,
            restrict_gpus=args.restrict_gpus, strict_driver=args.strict_driver, python=args.python,
            tensorflow=args.tensorflow,
        ),
        index_url=args.index_url, seed_pip=args.seed_pip, yes=args.yes, dry_run=args.dry_run, progress=not args.json,
    )
    return upgraded(ctx, upgrade(ctx, UpgradeRequest(env=args.env, to=args.to, profile=args.profile, install=template),
                                 asker(ctx, args.yes)))


def upgraded(ctx: Context, up: "Upgraded") -> Result:
    """install's document and screen for the new env, with the upgrade's: from where, what was carried over
    and what not, and which env is the default now."""
    from tfgpu_install.commands.install import installed

    old = up.old
    base = {"from": {"env": str(old), "tensorflow": up.old_tensorflow}, "profile": up.profile,
            "carried": list(up.carried), "not_carried": [n.to_json() for n in up.not_carried],
            "flags_from_record": list(up.flags_from_record)}
    if up.installed is None:
        return Result(data={"upgrade": {**base, "to": None}, "changed": False},
                      blocks=[Text(f"{old} already has TensorFlow {up.old_tensorflow}, profile '{up.profile}''s "
                                   "current choice: nothing to upgrade", "ok")])
    result = installed(ctx, up.installed)
    new, dry_run = up.installed.env, up.installed.dry_run
    result.data["upgrade"] = {**base, "to": {"env": str(new), "tensorflow": up.tensorflow},
                              "old_env_kept": up.old_env_kept}
    blocks: list[Block] = list(result.blocks)
    if up.flags_from_record:
        blocks.append(Text(f"as {old} was installed: {' '.join(up.flags_from_record)}", "dim"))
    if up.carried:
        blocks.append(Text(f"carried over from {old}: {', '.join(up.carried)}", "dim"))
    blocks += [Text(not_carried_line(ctx, n, new), "warn") for n in up.not_carried]
    if up.is_default:
        blocks.append(Text(f"{new} is now the default; the old env {old} is kept "
                           f"(`{command(ctx, 'tfgpu-install', 'envs', 'remove', str(old))}` when you no longer "
                           "need it)", "ok"))
    elif not dry_run:
        blocks.append(Text(f"{new} is not verified: the default is still {old}", "warn"))
    result.blocks = blocks
    return result


def not_carried_line(ctx: Context, n: "NotCarried", new: Path) -> str:
    """A package installed from a file or URL, left out of the new env: why, and how to add it again."""
    head = (f"not carried over: {n.requirement}, installed from {n.origin.url}, not from an index "
            "(by name, the index could give another project's package of that name)")
    path = n.origin.local_file()
    if n.file_ok and path is not None:
        cmd = command(ctx, "uv", "pip", "install", "--python", str(new / "bin" / "python"), str(path))
        return head + f"; its file is still there with the same sha256: `{cmd}` adds it"
    return head + "; install it again from where you got it"
