"""Build a Snapshot of a live environment: its state on disk, the host contract, the
resolution it was built from, and (optionally) each package's published hashes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from tfgpu_install import __version__
from tfgpu_install.conda.prefix import CondaRecord, installed
from tfgpu_install.context import Context
from tfgpu_install.facts.model import Facts
from tfgpu_install.snapshot.document import Verification
from tfgpu_install.snapshot.envstate import EnvState, capture
from tfgpu_install.snapshot.model import EnvRecord, HostContract, Package, RecordedResolution, Snapshot, new_id, now_iso


def host_contract(facts: Optional[Facts]) -> HostContract:
    if facts is None:
        return HostContract()
    return HostContract(
        driver=facts.driver.version,
        max_cuda=facts.driver.max_cuda,
        glibc=facts.host.glibc,
        arch=facts.host.arch,
        os=facts.host.os,
        gpus=tuple({"name": g.name, "compute_capability": g.compute_capability} for g in facts.gpus),
    )


def build(
    ctx: Context,
    env: Path,
    kind: str,
    *,
    facts: Optional[Facts] = None,
    resolution: Optional[RecordedResolution] = None,
    verification: Optional[Verification] = None,
    hashes: bool = True,
    index_url: Optional[str] = None,
    find_links: Optional[str] = None,
    state: Optional[EnvState] = None,
) -> Snapshot:
    env = Path(os.path.abspath(str(env)))
    state = state or capture(env)
    from tfgpu_install.env.state import hash_cache

    packages = with_builds(env, state.packages, hash_cache(ctx, env))
    notes: list[str] = []
    if hashes and packages:
        from tfgpu_install.snapshot.pylock import compile_lock, with_hashes

        host = host_contract(facts)
        lock = compile_lock(ctx, packages, state.python or "3", index_url=index_url, find_links=find_links,
                            glibc=host.glibc, arch=host.arch)
        packages = with_hashes(packages, lock)
        unhashed = [p.requirement() for p in packages if not p.hashes]
        if unhashed:
            notes.append("no published hash found for: " + ", ".join(unhashed))
    return Snapshot(
        id=new_id(kind),
        kind=kind,
        created=now_iso(),
        env=EnvRecord(path=str(env), backend=state.backend, python=state.python, conda_packages=conda_pins(env)),
        host=host_contract(facts),
        resolution=resolution or RecordedResolution(),  # the caller's: plan.journaled.recorded_plan for a journaled env
        packages=packages,
        files=state.files,
        activation=dict(state.activation),
        verification=verification,
        tool=f"tfgpu-install {__version__}",
        notes=tuple(notes),
    )


def with_builds(env: Path, packages: tuple[Package, ...], cache: Optional[Path] = None) -> tuple[Package, ...]:
    """Each package with what its installed files must be (env/builds.py: its RECORD's digest, as
    the env holds it now: the known-good record is taken right after the install and its check)."""
    from dataclasses import replace

    from tfgpu_install.env.integrity import builds

    found = builds(env, cache)
    out = []
    for p in packages:
        got = found.get(p.key)
        out.append(replace(p, content=got[1]) if got is not None and got[0] == p.version else p)
    return tuple(out)


def conda_pins(env: Path) -> Optional[tuple[CondaRecord, ...]]:
    """A conda env's packages (name, version, build, channel, sha256) under env.conda_packages:
    the CUDA/cuDNN conda packages are part of what made the env work. Absent for a venv."""
    records = installed(env)
    return tuple(records) if records else None
