"""The steps of a `snapshot restore`: the install's steps fed a pinned resolution (the snapshot's
exact packages, with hashes), plus removing what the snapshot does not list. Pure: builds objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from installer.plan.options import InstallOptions, options_from_json
from installer.resolver.model import Choice, Resolution, resolution_from_json
from installer.snapshot.contract import choice_of
from installer.snapshot.model import Package, Snapshot
from installer.steps.base import Step


def restore_steps(resolution: Resolution, options: InstallOptions, packages: Sequence[Package],
                  require_hashes: bool) -> list[Step]:
    from installer.steps.activation import WriteActivation
    from installer.steps.env import CreateEnv, TargetEnv
    from installer.steps.packages import InstallPackages
    from installer.steps.record import RecordSnapshot
    from installer.steps.sync import SyncPackages
    from installer.steps.verify import VerifyEnv
    from installer.verify.host import CheckPlan

    choice = resolution.choice
    assert choice is not None
    cpu_only = resolution.cpu_only or options.allow_cpu
    target = TargetEnv.at(options.env, options.backend, options.name)
    base = options.python or choice.python_path
    extra = options.extra or {}
    install = InstallPackages(
        target, [p.requirement() for p in packages],
        hashes={p.name: list(p.hashes) for p in packages if p.hashes},
        require_hashes=require_hashes,
        index_url=options.index_url,
        find_links=[u for u in extra.get("find_links", "").split() if u],
        no_index=bool(extra.get("no_index")),
    )
    return [
        CreateEnv(target, choice.python, Path(base) if base else None),
        install,
        SyncPackages(target, [p.name for p in packages]),
        WriteActivation(target.path, options.backend),
        VerifyEnv(target.path, CheckPlan.from_choice(choice, cpu_only=cpu_only)),
        RecordSnapshot(target.path, options.backend, resolution.to_json(), cpu_only=cpu_only),
    ]


def steps_from_restore_plan(plan: dict[str, Any]) -> list[Step]:
    r = plan["restore"]
    pkgs = [Package(str(p["name"]), str(p["version"]), tuple(p.get("hashes") or ())) for p in r.get("packages") or ()]
    return restore_steps(resolution_from_json(plan["resolution"]), options_from_json(plan["options"]), pkgs,
                         bool(r.get("require_hashes")))


def pinned_resolution(snap: Snapshot, python_path: Optional[str], cpu_only: bool) -> Resolution:
    c = choice_of(snap)
    choice = Choice(
        tensorflow=str(c.get("tensorflow") or "?"), cuda=c.get("cuda"), cudnn=c.get("cudnn"),
        python=str(c.get("python")), jit_only=bool(c.get("jit_only")), package=str(c.get("package") or "tensorflow"),
        python_path=python_path, cuda_from=str(c.get("cuda_from") or "pip"), pins=dict(c.get("pins") or {}),
        constraints=dict(c.get("constraints") or {}),
    )
    return Resolution(profile=f"snapshot:{snap.id}", choice=choice,
                      reasons=(f"pinned by snapshot {snap.id} ({snap.created})",), rejected=(), cpu_only=cpu_only)
