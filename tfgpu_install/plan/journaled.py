"""The plan as the journal keeps it (the "run" event's plan): what was resolved and asked, and
for a restore or a kernel install what else rollback needs to rebuild the same steps. Typed once
where it is read (`read_plan`); the journal's JSON only at the edge (to_json / read_plan)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import obj
from tfgpu_install.plan.install import build_steps
from tfgpu_install.plan.options import InstallOptions, options_from_json, options_to_json
from tfgpu_install.plan.restore import restore_steps
from tfgpu_install.resolver.model import Resolution, resolution_from_json
from tfgpu_install.snapshot.document import Package, RecordedResolution
from tfgpu_install.steps.base import Step


@dataclass(frozen=True)
class RestoreRecord:
    """What a `snapshot restore` run adds: the snapshot's exact packages (app/restore.py)."""

    snapshot: str
    require_hashes: bool
    offline: str  # the bundle restored from ("" online)
    packages: tuple[Package, ...]

    def to_json(self) -> dict[str, object]:
        return {"snapshot": self.snapshot, "require_hashes": self.require_hashes, "offline": self.offline,
                "packages": [{"name": p.name, "version": p.version, "hashes": list(p.hashes),
                              **({"content": p.content} if p.content else {})} for p in self.packages]}


@dataclass(frozen=True)
class JournaledPlan:
    resolution: Resolution
    options: InstallOptions
    restore: Optional[RestoreRecord] = None  # a `snapshot restore` run
    kernel: Optional[Mapping[str, str]] = None  # a `kernel install` run: its one step (RegisterKernel.to_plan)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"resolution": self.resolution.to_json(), "options": options_to_json(self.options)}
        if self.restore is not None:
            out["restore"] = self.restore.to_json()
        if self.kernel is not None:
            out["kernel"] = dict(self.kernel)
        return out

    def steps(self) -> list[Step]:
        """The steps this plan ran, rebuilt (rollback finds each one's undo)."""
        if self.kernel is not None:  # `kernel install`: the one step it ran (app/kernel.py)
            from tfgpu_install.steps.kernel import RegisterKernel

            return [RegisterKernel.from_plan(dict(self.kernel))]
        if self.restore is not None:  # a `snapshot restore` run: its own step list (plan/restore.py)
            return restore_steps(self.resolution, self.options, self.restore.packages, self.restore.require_hashes)
        return build_steps(self.resolution, self.options)


def read_plan(data: object) -> Optional[JournaledPlan]:
    """A journaled plan from the journal's JSON; None when it is not one (no resolution, a damaged
    entry): the plan is then unknown, never guessed."""
    if not isinstance(data, dict) or not isinstance(data.get("resolution"), dict):
        return None
    try:
        resolution = resolution_from_json(data["resolution"])
        options = options_from_json(data["options"] if isinstance(data.get("options"), dict) else {})
        return JournaledPlan(resolution, options, _restore(data.get("restore")), _kernel(data.get("kernel")))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _restore(raw: Any) -> Optional[RestoreRecord]:
    if not isinstance(raw, dict):
        return None
    pkgs = tuple(Package(str(p["name"]), str(p["version"]), tuple(p.get("hashes") or ()),
                         str(p["content"]) if p.get("content") else None)  # the build (env/builds.py)
                 for p in raw.get("packages") or ())
    return RestoreRecord(str(raw.get("snapshot") or ""), bool(raw.get("require_hashes")), str(raw.get("offline") or ""),
                         pkgs)


def _kernel(raw: Any) -> Optional[Mapping[str, str]]:
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else None


def last_journaled_plan(ctx: Context, env: Path) -> Optional[JournaledPlan]:
    """The plan of the newest run on this env (the current epoch), typed; None when there is none."""
    from tfgpu_install.env.journal import Journal, last_plan

    journal = Journal.for_env(ctx, env)
    return read_plan(last_plan(journal.entries())) if journal.exists() else None


def recorded_plan(ctx: Context, env: Path) -> RecordedResolution:
    """What the install journaled for this env (its last "run" event's resolution, with the user's
    own requirements), typed as a snapshot records it; empty when nothing was journaled or the
    journaled plan does not read as one (unknown, never a guess)."""
    from tfgpu_install.env.journal import Journal, last_plan
    from tfgpu_install.errors import BadInputError
    from tfgpu_install.plan.additions import OPTION, from_record, snapshot_block
    from tfgpu_install.snapshot.schema import checked_resolution

    journal = Journal.for_env(ctx, env)
    plan = (last_plan(journal.entries()) or {}) if journal.exists() else {}
    resolution = plan.get("resolution")
    if not isinstance(resolution, dict):
        return RecordedResolution()
    # The user's own requirements (--with, add) ride along, as the install's own record has them.
    options = obj(plan, "options")
    try:
        return checked_resolution({**resolution, **snapshot_block(from_record(options, OPTION))},
                                  f"the journal of {env}")
    except BadInputError:
        return RecordedResolution()
