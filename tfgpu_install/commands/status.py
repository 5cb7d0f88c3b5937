"""`tfgpu-install status [--env PATH]`: the arguments (tfgpu_install/app/status.py does the work)."""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_env_flag
from tfgpu_install.context import Context
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.status import status

    return status(ctx, args.env)
