"""Probe this machine and resolve a profile on it: what `plan` shows and `install` provisions."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem, NoGpuError, UnsatisfiableError, UsageError
from tfgpu_install.facts.background import Background
from tfgpu_install.facts.model import AssumeFlags, Facts, PythonInterp
from tfgpu_install.knowledge.model import Knowledge, Policy
from tfgpu_install.resolver.model import Resolution


@dataclass(frozen=True)
class ResolveRequest:
    profile: str = "stable"
    assume: AssumeFlags = field(default_factory=AssumeFlags)
    allow_cpu: bool = False
    allow_minor_compat: bool = False
    restrict_gpus: bool = False
    strict_driver: bool = False  # --strict-driver: no native-kernel pick through minor-version compatibility
    python: Optional[str] = None  # --python: a version ("3.11") or an interpreter path
    backend: Optional[str] = None  # --backend; None: decided from the choice
    conda_name: Optional[str] = None  # --name: a named conda env
    tensorflow: Optional[str] = None  # --tensorflow X.Y[.Z]: this release line (or release) only


@dataclass(frozen=True)
class Resolved:
    facts: Facts
    knowledge: Knowledge
    resolution: Resolution
    explicit_python: Optional[str] = None  # --python PATH as given


def resolve_machine(ctx: Context, req: ResolveRequest) -> Resolved:
    """Probe + resolve, never raising for "nothing fits" (the resolution says why)."""
    from tfgpu_install.facts.probe import assumptions, gather
    from tfgpu_install.facts.python import asked_version
    from tfgpu_install.knowledge.learned import with_learned
    from tfgpu_install.knowledge.load import knowledge_dir, load_knowledge, load_policy
    from tfgpu_install.resolver.resolve import resolve

    explicit = _explicit_interpreter(req)
    knowledge = with_learned(load_knowledge(knowledge_dir(ctx), cache_dir=ctx.cache_dir), ctx.state_dir)
    policy = load_policy(req.profile, knowledge)
    if req.tensorflow:
        policy = pinned_policy(policy, knowledge, req.tensorflow)
    # Its version asked beside the probe (remembered per binary: env.create asks it again). Started only
    # once the profile is known good: a thread left running by a refusal would still write the cache.
    asked = None if explicit is None else Background(partial(asked_version, ctx, explicit))
    facts = gather(ctx, assumptions(req.assume, ctx), knowledge)
    facts = _python_choice(req, facts, explicit, None if asked is None else asked.result())
    tools = facts.tools
    conda = bool(tools.conda or tools.mamba or tools.micromamba) or req.backend == "conda" or bool(req.conda_name)
    resolution = resolve(
        facts, knowledge, policy,
        allow_cpu=req.allow_cpu, conda_available=conda,
        allow_minor_compat=req.allow_minor_compat, restrict_gpus=req.restrict_gpus,
        strict_driver=req.strict_driver,
    )
    return Resolved(facts, knowledge, resolution, explicit)


def pinned_policy(policy: Policy, knowledge: Knowledge, wanted: str) -> Policy:
    """--tensorflow X.Y[.Z]: the profile with its TensorFlow range replaced by that release line (X.Y:
    the profile's preferred patch of it) or that release; its age and patch-release rules no longer
    apply (the user chose), its other rules (CUDA source, JIT, defects) still do. A version the
    knowledge tables do not have is a usage error naming the ones they do."""
    parts = wanted.split(".")
    known = [r.tensorflow for r in knowledge.releases]
    matching = [v for v in known if v.split(".")[: len(parts)] == parts]
    if not matching:
        lines = sorted({".".join(v.split(".")[:2]) for v in known}, key=lambda v: tuple(int(x) for x in v.split(".")))
        raise UsageError(f"TensorFlow {wanted} is not in the knowledge tables",
                         hint="known release lines: " + ", ".join(lines[-12:]) + " (`tfgpu-install profiles`)")
    spec = f"=={wanted}" if len(parts) == 3 else f"=={wanted}.*"
    return replace(policy, tensorflow=spec, min_age_days=0, require_patch_release=False, explicit=True,
                   name=f"{policy.name} (--tensorflow {wanted})")


def require_choice(resolved: Resolved, allow_cpu: bool) -> None:
    """Nothing fits: NO_GPU (3) when there is no usable GPU and no --allow-cpu, else UNSATISFIABLE (4)."""
    from tfgpu_install.resolver.resolve import has_usable_gpu

    resolution, facts = resolved.resolution, resolved.facts
    if resolution.choice is not None:
        return
    if not has_usable_gpu(facts) and not allow_cpu:
        # the probe's own note without its "tried: ..." list (the probe notes print that once)
        why = "; ".join(p.reason.split("; tried: ")[0] for p in facts.problems if p.field in ("gpus", "driver"))[:400]
        raise NoGpuError(
            "no usable NVIDIA GPU found on this machine" + (f" ({why})" if why else ""),
            hint="install or fix the NVIDIA driver (`tfgpu-install probe` shows what was found), or pass "
            "--allow-cpu to provision the same pinned env and verify TensorFlow on the CPU",
        )
    raise UnsatisfiableError(
        "no TensorFlow/CUDA/cuDNN/Python combination fits this machine and profile "
        f"'{resolution.profile}': " + "; ".join(resolution.reasons[-2:]),
        hint="; ".join(resolution.remedies) or "see `tfgpu-install plan` for every rejected candidate",
    )


def _explicit_interpreter(req: ResolveRequest) -> Optional[str]:
    """--python PATH, checked to be an executable file; None for a version or no --python."""
    want = req.python
    if not want or "/" not in want:
        return None
    path = Path(want).expanduser()
    try:
        usable = path.is_file() and os.access(path, os.X_OK)
    except OSError:  # e.g. EACCES on a directory on the way: as unusable as missing
        usable = False
    if not usable:
        raise EnvironmentProblem(
            f"the interpreter {want} does not exist or is not executable",
            hint="pass --python with a working interpreter path, or a version like 3.11",
            ref="python-missing",
        )
    return str(path)


def _python_choice(req: ResolveRequest, facts: Facts, explicit: Optional[str], asked: Optional[str]) -> Facts:
    """--python narrows the interpreters the resolver may pick. `explicit`: --python PATH, and
    `asked` the version it says it is (None when it did not answer)."""
    want = req.python
    if not want:
        return facts
    if explicit is not None:
        found = [p for p in facts.pythons if os.path.realpath(p.path) == os.path.realpath(explicit)]
        assumed = any(p.source.startswith("override") for p in facts.pythons)
        if not found and asked is not None and not assumed:  # found nowhere else: the one given, as it says
            found = [PythonInterp(path=explicit, version=asked, source="--python")]
        return replace(facts, pythons=tuple(found)) if found else facts
    found = [p for p in facts.pythons if p.minor == want or p.version == want]
    if not found and req.backend != "conda":
        have = ", ".join(sorted({p.minor for p in facts.pythons})) or "none"
        raise EnvironmentProblem(
            f"no Python {want} interpreter found on this machine (found: {have})",
            hint=f"install Python {want} (e.g. `uv python install {want}` or your distribution's package) "
            "and pass --python PATH, or use --backend conda to let conda provide it",
            ref="python-missing",
        )
    return replace(facts, pythons=tuple(found))
