"""`tfgpu-install gpu-check --pack DIR` (app/gpucheck_pack.py): the offline GPU-check pack."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import non_empty
from tfgpu_install.context import Context
from tfgpu_install.report import Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.gpucheck_pack import Pack


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pack", required=True, metavar="DIR", type=non_empty,
                   help="write what a machine with no network needs to run the GPU check into DIR (the script, "
                   "this tool's wheel and its dependencies, <= 64 MiB); there: DIR/gpu-check.sh --offline DIR")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.gpucheck_pack import PackRequest, pack

    return render(pack(ctx, PackRequest(pack=args.pack)))


def render(made: "Pack") -> Result:
    data = {"pack": str(made.path), "bytes": made.size, "wheels": list(made.wheels), "script": str(made.script),
            "run": made.run}
    return Result(data=data, blocks=[
        Text(f"GPU-check pack: {len(made.wheels)} wheels, {made.size / 2**20:.1f} MiB in {made.path}", "ok"),
        Text(f"on the GPU machine (no network needed): {made.run}")])
