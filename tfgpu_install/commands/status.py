"""`tfgpu-install status [--env PATH]`: the arguments, and the screen and --json for what
tfgpu_install/app/status.py finds."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_env_flag
from tfgpu_install.context import Context
from tfgpu_install.report import Block, Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.app.status import Status


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.status import status

    return render(status(ctx, args.env))


def render(found: "Status") -> Result:
    env = found.env
    if not found.installed:
        return Result(
            data={"env": str(env), "installed": False, "steps": [], "verification": None},
            blocks=[Text(f"no install recorded for {env}", "warn"),
                    Text("install one with: tfgpu-install --profile stable", "dim")],
        )
    blocks: list[Block] = [table(f"status of {env}", ("step", "state", "journal", "what"),
                                 [(s.id, s.state, s.journal, s.describe) for s in found.steps])]
    verification = found.verification
    if verification is None:
        blocks.append(Text("never verified", "warn"))
    else:
        style = "ok" if verification["ok"] else "error"
        gpu = "GPU" if verification.get("gpu_verified") else "CPU only"
        blocks.append(Text(f"last verification ({verification.get('when') or '?'}, {gpu}): "
                           f"{verification.get('summary') or ('passed' if verification['ok'] else 'failed')}", style))
    return Result(data={"env": str(env), "installed": True, "complete": found.complete,
                        "steps": [asdict(s) for s in found.steps], "verification": verification}, blocks=blocks)
