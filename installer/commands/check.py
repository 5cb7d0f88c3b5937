"""`tfgpu-install check` (placeholder until its issue lands)."""

from __future__ import annotations

import argparse

from ..context import Context
from ..errors import TfgpuError
from ..report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, ctx: Context) -> Result:
    raise TfgpuError("`check` is not implemented yet", ref="not-implemented")
