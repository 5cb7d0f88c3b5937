"""`fleet install|status|snapshot|restore`: the same work on every host of an inventory, run by the fleet
engine (tfgpu_install/fleet/: ansible-playbook, per-host results); commands/fleet.py renders the outcome."""

from __future__ import annotations

from dataclasses import dataclass

from tfgpu_install.context import Context
from tfgpu_install.fleet.run import (
    FleetInterrupted,
    FleetReport,
    FleetRequest,
    OnResult,
    fleet_install,
    fleet_restore,
    fleet_snapshot,
    fleet_status,
)

MODES = {"install": fleet_install, "status": fleet_status, "snapshot": fleet_snapshot, "restore": fleet_restore}


@dataclass(frozen=True)
class FleetRun:
    """What a fleet run found, host by host (commands/fleet.py renders it)."""

    report: FleetReport
    interrupted: bool  # Ctrl-C: the rows so far, the rest "not finished"


def fleet(ctx: Context, req: FleetRequest, on_result: OnResult) -> FleetRun:
    """Run `req.mode` on every host; `on_result` sees each host's result as it arrives (the live table)."""
    try:
        return FleetRun(MODES[req.mode](ctx, req, on_result), False)
    except FleetInterrupted as stop:
        return FleetRun(stop.report, True)
