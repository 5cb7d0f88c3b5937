"""The plan as the journal keeps it: resolution + options as JSON; rollback rebuilds the steps from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfgpu_install.context import Context
from tfgpu_install.plan.install import build_steps
from tfgpu_install.plan.options import InstallOptions, options_from_json, options_to_json
from tfgpu_install.plan.restore import steps_from_restore_plan
from tfgpu_install.resolver.model import Resolution, resolution_from_json
from tfgpu_install.snapshot.document import RecordedResolution
from tfgpu_install.steps.base import Step


def plan_to_json(resolution: Resolution, options: InstallOptions) -> dict[str, Any]:
    return {"resolution": resolution.to_json(), "options": options_to_json(options)}


def steps_from_plan(plan: dict[str, Any]) -> list[Step]:
    """The steps of a journaled plan (see plan_to_json)."""
    if "kernel" in plan:  # `kernel install`: the one step it ran (app/kernel.py)
        from tfgpu_install.steps.kernel import RegisterKernel

        return [RegisterKernel.from_plan(plan["kernel"])]
    if "restore" in plan:  # a `snapshot restore` run: its own step list (plan/restore.py)
        return steps_from_restore_plan(plan)
    return build_steps(resolution_from_json(plan["resolution"]), options_from_json(plan["options"]))


def recorded_plan(ctx: Context, env: Path) -> RecordedResolution:
    """What the install journaled for this env (its last "run" event's resolution, with the user's
    own requirements), typed as a snapshot records it; empty when nothing was journaled or the
    journaled plan does not read as one (unknown, never a guess)."""
    from tfgpu_install.env.journal import Journal, last_plan
    from tfgpu_install.errors import BadInputError
    from tfgpu_install.plan.additions import OPTION, from_record, snapshot_block
    from tfgpu_install.snapshot.schema import checked_resolution

    journal = Journal.for_env(ctx, env)
    plan = dict(last_plan(journal.entries()) or {}) if journal.exists() else {}
    if not isinstance(plan.get("resolution"), dict):
        return RecordedResolution()
    # The user's own requirements (--with, add) ride along, as the install's own record has them.
    options = plan.get("options") if isinstance(plan.get("options"), dict) else {}
    try:
        return checked_resolution({**plan["resolution"], **snapshot_block(from_record(options, OPTION))},
                                  f"the journal of {env}")
    except BadInputError:
        return RecordedResolution()
