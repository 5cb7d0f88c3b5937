"""`tfgpu-install status [--env PATH]`: the arguments (installer/app/status.py does the work)."""

from __future__ import annotations

import argparse

from installer.commands.common import add_env_flag
from installer.context import Context
from installer.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.app.status import status

    return status(ctx, args.env)
