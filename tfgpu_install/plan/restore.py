"""The steps of a `snapshot restore`: the install's steps fed a pinned resolution (the snapshot's
exact packages, with hashes), plus removing what the snapshot does not list. Pure: builds objects."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from tfgpu_install.facts.model import Facts
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.model import Choice, Resolution
from tfgpu_install.snapshot.contract import choice_of
from tfgpu_install.snapshot.model import Package, Snapshot
from tfgpu_install.steps.base import Step


def restore_steps(resolution: Resolution, options: InstallOptions, packages: Sequence[Package],
                  require_hashes: bool, facts: Optional[Facts] = None) -> list[Step]:
    from tfgpu_install.env.target import TargetEnv
    from tfgpu_install.snapshot.document import RecordedResolution
    from tfgpu_install.snapshot.model import SEEDED
    from tfgpu_install.snapshot.record import RecordSnapshot
    from tfgpu_install.steps.activation import WriteActivation
    from tfgpu_install.steps.env import CreateEnv
    from tfgpu_install.steps.packages import InstallPackages
    from tfgpu_install.steps.sync import SyncPackages
    from tfgpu_install.steps.verify import VerifyEnv
    from tfgpu_install.verify.host import CheckPlan

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
        full_check=True,  # the same versions are not enough: the same bytes (code swapped in place)
        expected={p.key: (p.version, p.content) for p in packages if p.content},  # and the recorded builds
    )
    conda = _pinned_conda_cuda(choice, options, target.path)
    lib_dirs = [target.path / "lib"] if conda else []
    return [
        # pip as install gives it (snapshots leave the seeded pip out: model.SEEDED), and kept by the sync
        CreateEnv(target, choice.python, Path(base) if base else None, seed_pip=True,
                  channel=extra.get("conda_channel")),
        install,
        *conda,
        SyncPackages(target, [p.name for p in packages] + sorted(SEEDED)),
        WriteActivation(target.path, options.backend, extra_lib_dirs=lib_dirs),
        VerifyEnv(target.path, CheckPlan.from_choice(choice, lib_dirs=[str(d) for d in lib_dirs], cpu_only=cpu_only)),
        RecordSnapshot(target.path, options.backend,
                       RecordedResolution(resolution, tuple(options.with_requirements)), cpu_only=cpu_only,
                       facts=facts),
    ]


def conda_restore_extra(snap: Snapshot) -> dict[str, str]:
    """What a restore needs of a conda env's snapshot, as InstallOptions.extra (journaled with
    the options): the exact conda packages and the channel they came from."""
    records = [r for r in snap.env.conda_packages or () if r.name]
    if not records:
        return {}
    pins = " ".join(f"{r.name}={r.version}={r.build}" for r in records)
    channel = next((r.channel for r in records if r.channel), "")
    return {"conda_pins": pins, **({"conda_channel": channel} if channel else {})}


def _pinned_conda_cuda(choice: Choice, options: InstallOptions, env: Path) -> list[Step]:
    from tfgpu_install.steps.conda_packages import pinned_conda_cuda_step

    extra = options.extra or {}
    pins = (extra.get("conda_pins") or "").split()
    if options.backend != "conda" or not pins or choice.cuda_from != "system":
        return []
    profiles = Path(extra["profiles_dir"]) if extra.get("profiles_dir") else None
    step = pinned_conda_cuda_step(env, choice.cuda, pins, extra.get("conda_channel"), options.name, profiles)
    return [step] if step is not None else []


def pinned_resolution(snap: Snapshot, python_path: Optional[str], cpu_only: bool) -> Resolution:
    c = choice_of(snap)
    choice = Choice(
        tensorflow=c.tensorflow or "?", cuda=c.cuda, cudnn=c.cudnn, python=c.python, jit_only=c.jit_only,
        package=c.package or "tensorflow", python_path=python_path, cuda_from=c.cuda_from or "pip",
        pins=dict(c.pins), constraints=dict(c.constraints),
    )
    return Resolution(profile=f"snapshot:{snap.id}", choice=choice,
                      reasons=(f"pinned by snapshot {snap.id} ({snap.created})",), rejected=(), cpu_only=cpu_only)
