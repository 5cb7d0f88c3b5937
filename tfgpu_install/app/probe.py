"""`probe`: what this machine has, each value with its source (commands/probe.py renders it)."""

from __future__ import annotations

from tfgpu_install.context import Context
from tfgpu_install.facts.model import AssumeFlags, Facts


def probe(ctx: Context, assume: AssumeFlags) -> Facts:
    """This run's facts: --assume-* and TFGPU_OVERRIDE_* beat detection; a failed probe is a reason."""
    from tfgpu_install.facts.probe import assumptions, gather

    return gather(ctx, assumptions(assume, ctx))
