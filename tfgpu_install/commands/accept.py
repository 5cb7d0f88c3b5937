"""`tfgpu-install accept [--env PATH] [--timeout SECONDS] [--wait]`: re-verify the env as it is now and, only
if that passes, record it as the new known-good (the previous one stays in the snapshot history).

Exit 0: accepted (or nothing changed since the known-good); 9: the verification failed, nothing recorded;
11: the env is damaged (installed files differ from their records), not only changed.
"""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_env_flag
from tfgpu_install.context import Context
from tfgpu_install.guard import argtypes
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--timeout", type=argtypes.seconds(1, 86400), default=None, metavar="SECONDS",
                   help="kill the verification after this long (default: 300 s)")
    p.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it instead of failing")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.accept import AcceptRequest, accept

    return accept(ctx, AcceptRequest(env=args.env, timeout=args.timeout, wait=args.wait))
