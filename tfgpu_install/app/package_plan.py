"""The package changes of an install or `add`, for people: before (the dry run, the confirmation: what uv
says it would add, change and remove) and after (what the run did to the packages the env had)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport
from tfgpu_install.report import Block, Bullets, Text
from tfgpu_install.steps.package_changes import PackageChanges


def planned_changes(ctx: Context, steps: Sequence[Any], preview: ExecReport) -> Optional[PackageChanges]:
    """What the pending packages step would add, change and remove (uv's dry run; changes nothing);
    None when the packages step has nothing to do."""
    from tfgpu_install.steps.packages import InstallPackages

    pending = {s.id for s in preview.steps if s.status == "pending"}
    step = next((s for s in steps if isinstance(s, InstallPackages)), None)
    if step is None or step.id not in pending:
        return None
    return step.preview_changes(ctx, target_python(steps))


def package_blocks(changes: Optional[PackageChanges]) -> list[Block]:
    """Every package the run will add, change or remove, with versions; what it changes of the packages
    the env has now (a user's own among them) said first, as a warning."""
    if changes is None:
        return []
    if changes.unknown or changes.empty:
        return [Text(changes.summary(), "dim")]
    blocks: list[Block] = []
    mine = changes.of_installed()
    if not mine.empty:
        blocks.append(Bullets("this changes packages the env has now", tuple(mine.lines()), "warn"))
    blocks.append(Bullets(changes.summary(), tuple(changes.lines())))
    return blocks


def changes_made(results: Mapping[str, Any]) -> Optional[PackageChanges]:
    """What this run's packages step did, from its record (the env's versions before and after)."""
    from tfgpu_install.steps.package_changes import between

    record = results.get("packages.install")
    if not isinstance(record, dict) or not isinstance(record.get("after"), dict):
        return None
    before = record.get("before")
    was = {str(k): str(v) for k, v in before.items()} if isinstance(before, dict) else {}
    return between(was, {str(k): str(v) for k, v in record["after"].items()})


def changed_in_env_blocks(changes: Optional[PackageChanges]) -> list[Block]:
    """After a run: the packages the env had that it changed or removed (with -y nobody was asked first)."""
    if changes is None or changes.of_installed().empty:
        return []
    return [Bullets("changed packages the env had", tuple(changes.of_installed().lines()), "warn")]


def target_python(steps: Sequence[Any]) -> Optional[str]:
    """The env's Python X.Y (its wheels' tags), from the env.create step; None: the tool's own."""
    from tfgpu_install.steps.env import CreateEnv

    for s in steps:
        if isinstance(s, CreateEnv) and isinstance(s.python_version, str):
            return s.python_version
    return None
