"""`tfgpu-install check [--env PATH]`: drift from the last known-good snapshot, and
every installed file against its distribution's record (like `rpm -V`).

Exit 0: no drift; 11 (DRIFT): something changed (for scripts and cron).
"""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_env_flag
from tfgpu_install.context import Context
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--full", action="store_true",
                   help="hash every installed file (default: sizes of all, sha256 of the shared libraries)")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.snapshot import check

    return check(ctx, args.env, full=bool(getattr(args, "full", False)),
                 progress=not getattr(args, "json", False))
