"""`tfgpu-install upgrade [--env OLD] [--to NEW] [--profile P]`: the arguments (tfgpu_install/app/upgrade.py
does the work); the env-shaping flags are install's own."""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_assume_flags, non_empty
from tfgpu_install.context import Context
from tfgpu_install.report import Result


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

    template = InstallRequest(
        resolve=ResolveRequest(
            assume=assume_flags(args), allow_cpu=args.allow_cpu, allow_minor_compat=args.allow_minor_compat,
            restrict_gpus=args.restrict_gpus, strict_driver=args.strict_driver, python=args.python,
            tensorflow=args.tensorflow,
        ),
        index_url=args.index_url, seed_pip=args.seed_pip, yes=args.yes, dry_run=args.dry_run, progress=not args.json,
    )
    return upgrade(ctx, UpgradeRequest(env=args.env, to=args.to, profile=args.profile, install=template))
