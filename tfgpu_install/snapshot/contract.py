"""Does this host meet a snapshot's contract? (pure: facts + knowledge + snapshot in, reasons out)

A restore on the wrong machine must fail before anything is written, with every reason at
once: the driver too old for the snapshot's CUDA, a GPU the TensorFlow build has no
kernels for, a glibc older than the wheels need, no interpreter for the env's Python, a
different CPU architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from tfgpu_install.facts.model import Facts
from tfgpu_install.knowledge.model import Knowledge, Release
from tfgpu_install.resolver.model import Choice
from tfgpu_install.snapshot.model import Snapshot
from tfgpu_install.verify.gpucheck.tfgpucheck_arch import cc_key, coverage


@dataclass(frozen=True)
class Verdict:
    refusals: tuple[str, ...] = ()  # each one alone makes the restore refuse
    warnings: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()  # what passed, for the report
    gpu: bool = True  # the restore targets a GPU (False: a CPU-only snapshot or --allow-cpu without a GPU)

    @property
    def ok(self) -> bool:
        return not self.refusals


def _key(version: str) -> tuple[int, ...]:
    out = []
    for part in str(version).split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def choice_of(snap: Snapshot) -> Choice:
    """The snapshot's combination (the resolver's Choice), whichever shape it was recorded in
    (the reader types them all); what it lacks comes from the snapshot itself where it has it
    (Python from the env, TensorFlow from the packages), else stays empty: unknown."""
    c = snap.resolution.choice or Choice(tensorflow="", cuda=None, cudnn=None, python="", jit_only=False)
    if not c.python and snap.env.python:
        c = replace(c, python=".".join(snap.env.python.split(".")[:2]))
    if not c.tensorflow:
        tf = snap.package_map().get("tensorflow") or snap.package_map().get("tensorflow-gpu")
        if tf is not None:
            c = replace(c, tensorflow=tf.version)
    return c


def find_release(
    knowledge: Optional[Knowledge], tensorflow: Optional[str], package: str = "tensorflow"
) -> Optional[Release]:
    if knowledge is None or not tensorflow:
        return None
    rows = [r for r in knowledge.releases if r.tensorflow == tensorflow]
    return next((r for r in rows if r.package == package), rows[0] if rows else None)


def _min_driver(knowledge: Optional[Knowledge], cuda: str) -> Optional[str]:
    if knowledge is None:
        return None
    rows = [r for r in knowledge.drivers if _key(r.cuda) >= _key(cuda)]
    return min(rows, key=lambda r: _key(r.cuda)).min_driver if rows else None


def _coverage(cc: str, release: Release) -> str:
    """"sass", "ptx", "none" or "unknown": the one coverage rule (gpucheck/tfgpucheck_arch), as the
    resolver and the in-env check use it."""
    if len(cc_key(cc)) < 2:
        return "unknown"
    return coverage(cc, release.sass, release.ptx)[0]


@dataclass
class _Acc:
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


def _gpu_checks(acc: _Acc, snap_choice: Choice, facts: Facts, knowledge: Optional[Knowledge],
                release: Optional[Release]) -> None:
    cuda = snap_choice.cuda
    driver = facts.driver
    if not facts.gpus:
        acc.refusals.append("no NVIDIA GPU found here, and the snapshot's env was built for one "
                            "(pass --allow-cpu to restore it and verify TensorFlow on the CPU)")
    if cuda:
        if not driver.version:
            acc.refusals.append(f"no NVIDIA driver answered here; the snapshot needs CUDA {cuda}")
        elif driver.max_cuda and _key(driver.max_cuda)[:2] < _key(cuda)[:2]:
            need = _min_driver(knowledge, cuda)
            acc.refusals.append(
                f"driver {driver.version} supports CUDA <= {driver.max_cuda} "
                f"({driver.max_cuda_source or driver.source}),"
                f" but the snapshot's TensorFlow {snap_choice.tensorflow or '?'} is built for CUDA {cuda}"
                + (f": install driver >= {need}" if need else ""))
        elif not driver.max_cuda:
            acc.warnings.append(f"the highest CUDA driver {driver.version} supports is unknown; "
                                f"not checked against CUDA {cuda}")
        else:
            acc.checked.append(f"driver {driver.version} supports CUDA {driver.max_cuda} >= {cuda}")
    if release is None:
        if facts.gpus:
            acc.warnings.append(f"TensorFlow {snap_choice.tensorflow or '?'} is not in this tool's knowledge: "
                                "the GPUs' architectures were not checked against its build")
        return
    for g in facts.gpus:
        label = f"GPU {g.index} {g.name}"
        if not g.compute_capability:
            acc.warnings.append(f"{label}: compute capability unknown; not checked")
            continue
        how = _coverage(g.compute_capability, release)
        if how == "none":
            acc.refusals.append(
                f"{label} (compute capability {g.compute_capability}): TensorFlow {release.tensorflow} has no "
                f"kernels for it (SASS: {', '.join(release.sass) or 'none'}; PTX: {', '.join(release.ptx) or 'none'})")
        elif how == "ptx":
            acc.warnings.append(f"{label} (cc {g.compute_capability}) runs TensorFlow {release.tensorflow} "
                                "only through "
                                "PTX JIT: the first run compiles for minutes")
        else:
            acc.checked.append(f"{label} (cc {g.compute_capability}) has kernels in TensorFlow {release.tensorflow}")


def check_host(snap: Snapshot, facts: Facts, knowledge: Optional[Knowledge], *, allow_cpu: bool = False,
               conda_available: bool = False) -> Verdict:
    acc = _Acc()
    c = choice_of(snap)
    release = find_release(knowledge, c.tensorflow or None, c.package or "tensorflow")
    usable_gpu = bool(facts.gpus) and bool(facts.driver.version) and facts.driver.loaded
    cpu_only = snap.resolution.cpu_only
    gpu = not cpu_only and not (allow_cpu and not usable_gpu)
    if gpu:
        _gpu_checks(acc, c, facts, knowledge, release)
    elif not cpu_only:
        acc.warnings.append("no usable GPU here: the env is restored and TensorFlow verified on the CPU (--allow-cpu)")

    # glibc: the wheels' manylinux tag names the oldest glibc they load on.
    if release is not None and release.min_glibc and facts.host.glibc:
        if _key(facts.host.glibc)[:2] < _key(release.min_glibc)[:2]:
            acc.refusals.append(
                f"glibc {facts.host.glibc} ({facts.host.glibc_source or 'probed'}) is older than the "
                f"{release.min_glibc} "
                f"TensorFlow {release.tensorflow}'s wheels need ({release.manylinux})")
        else:
            acc.checked.append(f"glibc {facts.host.glibc} >= {release.min_glibc}")
    elif not facts.host.glibc:
        acc.warnings.append("glibc version unknown here; not checked")

    arch = snap.host.arch
    if arch and facts.host.arch and arch != facts.host.arch:
        acc.refusals.append(f"the snapshot's wheels are for {arch}; this machine is {facts.host.arch}")

    py = c.python
    backend = str(snap.env.backend or "venv")
    if py:
        have = sorted({p.minor for p in facts.pythons})
        if py in have:
            acc.checked.append(f"Python {py} found")
        elif backend == "conda" and conda_available:
            acc.checked.append(f"Python {py} comes from conda")
        else:
            acc.refusals.append(
                f"no Python {py} interpreter here (found: {', '.join(have) or 'none'}); the env needs Python {py}: "
                f"install it (e.g. `uv python install {py}`)" + ("" if conda_available else " or install conda"))
    return Verdict(tuple(acc.refusals), tuple(acc.warnings), tuple(acc.checked), gpu)


__all__ = ["Verdict", "check_host", "choice_of", "find_release"]
