"""The package changes of an install or `add`: before (the dry run, the confirmation: what uv says it would
add, change and remove) and after (what the run did to the packages the env had); commands/package_plan.py
words them for people."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport
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


def changes_made(results: Mapping[str, Any]) -> Optional[PackageChanges]:
    """What this run's packages step did, from its record (the env's versions before and after)."""
    from tfgpu_install.steps.package_changes import between

    record = results.get("packages.install")
    if not isinstance(record, dict) or not isinstance(record.get("after"), dict):
        return None
    before = record.get("before")
    was = {str(k): str(v) for k, v in before.items()} if isinstance(before, dict) else {}
    return between(was, {str(k): str(v) for k, v in record["after"].items()})


def target_python(steps: Sequence[Any]) -> Optional[str]:
    """The env's Python X.Y (its wheels' tags), from the env.create step; None: the tool's own."""
    from tfgpu_install.steps.env import CreateEnv

    for s in steps:
        if isinstance(s, CreateEnv) and isinstance(s.python_version, str):
            return s.python_version
    return None


def uv_links(ctx: Context, env: Path) -> Optional[bool]:
    """Whether uv links its cache's files into `env` (so a cached wheel takes no new space there): its cache
    and the env on one filesystem, and no UV_LINK_MODE=copy. None when uv cannot say where its cache is."""
    from tfgpu_install.env.tools import find_uv, tool_env

    if (ctx.env("UV_LINK_MODE") or "").lower() == "copy":
        return False
    uv = find_uv(ctx)
    if uv is None:
        return None
    done = ctx.runner.run([uv, "cache", "dir"], desc="where uv's cache is", env=tool_env(ctx), timeout=60)
    if not done.ok or not done.stdout.strip():
        return None
    cache, target = _existing(Path(done.stdout.strip())), _existing(env)
    if cache is None or target is None:
        return None
    return cache.stat().st_dev == target.stat().st_dev


def _existing(path: Path) -> Optional[Path]:
    """The path, or its nearest parent that exists (where a new dir would be made)."""
    import os

    probe = Path(os.path.abspath(str(path)))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe if probe.exists() else None
