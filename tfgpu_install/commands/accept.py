"""`tfgpu-install accept [--env PATH] [--timeout SECONDS] [--wait]`: re-verify the env as it is now and, only
if that passes, record it as the new known-good (the previous one stays in the snapshot history).

Exit 0: accepted (or nothing changed since the known-good); 9: the verification failed, nothing recorded;
11: the env is damaged (installed files differ from their records), not only changed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_env_flag
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.guard import argtypes
from tfgpu_install.guard.shellquote import command
from tfgpu_install.report import Block, Bullets, Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.accept import Accepted


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--timeout", type=argtypes.seconds(1, 86400), default=None, metavar="SECONDS",
                   help="kill the verification after this long (default: 300 s)")
    p.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it instead of failing")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.accept import AcceptRequest, accept

    done = accept(ctx, AcceptRequest(env=args.env, timeout=args.timeout, wait=args.wait))
    return accepted(ctx, done) if done.accepted else refused(ctx, done)


def refused(ctx: Context, done: "Accepted") -> Result:
    from tfgpu_install.verify.host import report_blocks

    env, report, kept = done.env, done.report, done.previous
    bad = report.first_failure
    what = f"layer {bad.layer} ({bad.name}): {bad.summary}" if bad else report.summary()
    blocks: list[Block] = [Text(f"not accepted: the verification of {env} as it is now failed at {what}", "error"),
                           *report_blocks(report)]
    if kept:
        blocks.append(Text(f"the known-good snapshot is still {kept}: "
                           f"`{command(ctx, 'tfgpu-install', 'snapshot', 'restore', kept, '--env', str(env))}` "
                           "returns the env to it", "dim"))
    data = {"env": str(env), "accepted": False, "snapshot": kept, "verification": report.to_json()}
    return Result(data, blocks, exit_code=int(ExitCode.VERIFY_FAILED))


def accepted(ctx: Context, done: "Accepted") -> Result:
    env, report, previous = done.env, done.report, done.previous
    data = {
        "env": str(env), "accepted": True, "snapshot": done.new,
        "previous": previous, "unchanged": done.unchanged, "accepted_changes": list(done.changes),
        "drift": done.drift, "gpu_verified": bool(report.gpu_verified), "verification": report.to_json(),
    }
    mode = "on the GPU" if report.gpu_verified else "on the CPU only (GPU not checked)"
    if done.unchanged:
        return Result(data, [Text(f"{env} verified again now ({mode}); nothing changed since its known-good "
                                  f"snapshot {previous}: nothing new to record", "ok")])
    blocks: list[Block] = [Text(f"accepted: {env} verified now ({mode}) and recorded as its known-good snapshot "
                                f"{done.new or '?'}", "ok")]
    if done.changes:
        blocks.append(Bullets(f"what changed since {previous}, now accepted", done.changes))
    if previous is not None:
        blocks.append(Text(f"the previous known-good {previous} is kept: "
                           f"`{command(ctx, 'tfgpu-install', 'snapshot', 'restore', previous, '--env', str(env))}`"
                           " returns to it", "dim"))
    return Result(data, blocks)
