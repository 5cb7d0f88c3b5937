"""The plan as the journal keeps it: resolution + options as JSON; rollback rebuilds the steps from it."""

from __future__ import annotations

from typing import Any

from tfgpu_install.plan.install import build_steps
from tfgpu_install.plan.options import InstallOptions, options_from_json, options_to_json
from tfgpu_install.plan.restore import steps_from_restore_plan
from tfgpu_install.resolver.model import Resolution, resolution_from_json
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
