"""Resolve: which TensorFlow / CUDA / cuDNN / Python combination this machine can run, and why.

Pure: reads Facts, Knowledge and a Policy, returns a Resolution. It never raises for
"nothing fits"; it returns no choice, the reasons and the remedies.

How it decides (the same order the explanation follows):
1. Candidates are the knowledge's releases the policy keeps, in the policy's order.
2. Each candidate is checked against every hard constraint, and every failing one is
   recorded (not just the first): driver max CUDA, each visible GPU's compute capability
   (SASS of the same major at or below its minor; else PTX at or below it, flagged
   jit_only), a Python that exists here or that conda can provide, glibc, architecture,
   native Windows (TF <= 2.10 only) and blocking defects.
3. The first candidate with no failure is the choice; every candidate before it is in
   `rejected` with all its failures.
4. Options are offered, never applied silently: CUDA minor-version compatibility,
   restricting CUDA_VISIBLE_DEVICES on a mixed host, an older release without JIT.
5. Nothing fits: remedies (the driver to install, CPU-only TensorFlow, WSL2, a Python).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date
from typing import Optional, Sequence

from tfgpu_install.facts.model import Facts
from tfgpu_install.knowledge.model import Knowledge, Policy, Release, version_key
from tfgpu_install.resolver.checks import (
    WINDOWS_NATIVE_GPU_LAST,
    Finding,
    Machine,
    Pick,
    candidates,
    defect_applies,
    evaluate,
    failures,
    first_clause,
    gpu_coverage,
    has_usable_gpu,
    machine_view,
    max_cuda_from_table,
    min_driver_for,
    required_cuda,
    span,
    summary,
    visible_gpus,
)
from tfgpu_install.resolver.model import Choice, Rejection, Resolution
from tfgpu_install.resolver.userspace import arm_remedies, ptxas_upgrade, wheel_notes

__all__ = [
    "resolve", "candidates", "evaluate", "gpu_coverage", "has_usable_gpu", "visible_gpus", "max_cuda_from_table",
    "min_driver_for", "required_cuda", "version_key",
]


# --- the resolution -----------------------------------------------------------------------


def _choice(r: Release, pick: Pick, findings: Sequence[Finding], visible: Optional[str] = None) -> Choice:
    pins, hashes, cudnn = dict(r.pins), {name: [digest] for name, digest in sorted(r.pin_hashes.items())}, r.cudnn
    for name, version, digest in (f.pin for f in findings if f.ok and f.pin):
        # a pin a GPU of this machine needs instead (kernels.yaml floors): its hash from the same row
        pins[name] = version
        hashes = {**hashes, name: [digest]} if digest else {k: v for k, v in hashes.items() if k != name}
        if name.startswith("nvidia-cudnn-"):
            cudnn = ".".join(version.split(".")[:2])
    return Choice(
        tensorflow=r.tensorflow,
        cuda=required_cuda(r) if r.cuda or r.pins else None,
        cudnn=cudnn,
        python=pick.python or "",
        jit_only=any(f.jit for f in findings),
        package=r.package,
        python_path=pick.python_path,
        cuda_from=r.cuda_from,
        pins=pins,
        constraints=dict(r.constraints),
        visible_devices=visible,
        hashes=hashes,
        sonames=list(r.sonames) if r.cuda_from == "system" else [],
    )


def _release_warnings(r: Release, policy: Policy, python: str) -> list[str]:
    out = []
    for d in r.defects:
        if (d.blocks and not policy.allow_defects) or not defect_applies(d, r, python):
            continue
        fix = f"; the installer handles it: {d.fix}" if d.fix else ""
        out.append(f"TF {r.tensorflow}: {d.text} ({d.source}){fix}")
    if r.unconfirmed:
        where = "learned.yaml" if r.learned else "matrix.yaml"  # a learned row lives in the user's overlay
        out.append(f"TF {r.tensorflow}: not confirmed from a source: {', '.join(r.unconfirmed)} ({where}:{r.line})")
    return out


def resolve(
    facts: Facts,
    knowledge: Knowledge,
    policy: Policy,
    *,
    allow_cpu: bool = False,
    conda_available: bool = False,
    allow_minor_compat: bool = False,
    restrict_gpus: bool = False,
    strict_driver: bool = False,
    today: Optional[date] = None,
) -> Resolution:
    """Choose the first candidate (policy order) that fits every hard constraint; explain it all.

    allow_minor_compat: accept a release the driver runs only through CUDA minor-version
    compatibility (otherwise only offered). restrict_gpus: on a mixed host, accept a release
    that runs on a subset of the GPUs and set choice.visible_devices (otherwise only offered).
    strict_driver: never prefer a native-kernel release that runs only through minor-version
    compatibility over a PTX-JIT-only one the driver supports outright (the default prefers it).
    """
    m = machine_view(facts, knowledge, conda_available)
    cands, left_out = candidates(knowledge, policy, today)
    gpu_mode = m.gpu_ready
    cpu_mode = not gpu_mode and allow_cpu
    reasons: list[str] = [_headline(policy, cands, left_out), *m.notes]
    if not gpu_mode:
        if not allow_cpu:
            return _no_gpu(facts, knowledge, policy, m, cands, reasons)
        reasons.append("no NVIDIA GPU: resolving for CPU verification (--allow-cpu); GPU constraints not applied")
    found = _search(cands, m, policy, gpu_mode, allow_minor_compat, restrict_gpus, strict_driver)
    reasons += found.reasons
    if found.chosen is not None and found.release is not None:
        return _chosen(found, cands, m, knowledge, policy, gpu_mode, cpu_mode, reasons)
    reasons.append(
        "nothing fits: no candidate passes every constraint (see rejected)" if cands
        else f"nothing fits: profile '{policy.name}' keeps no release"
    )
    if cands and all(any(f.kind == "arch" for f in failures(fs)) for _, fs, _ in found.evaluated):
        reasons.append(f"{m.arch}{' (NVIDIA Jetson: ' + m.tegra + ')' if m.tegra else ''}: no release in "
                       f"matrix.yaml has a GPU wheel for {m.arch} on PyPI; see the remedies")
    return Resolution(
        profile=policy.name,
        choice=None,
        reasons=tuple(reasons),
        rejected=tuple(found.rejected),
        options=tuple(_options(found.evaluated, m, None, gpu_mode)),
        remedies=tuple(_remedies(found.evaluated, m, knowledge, gpu_mode)),
        warnings=tuple(found.warnings),
        cpu_only=cpu_mode,
    )


def _headline(policy: Policy, cands: Sequence[Release], left_out: Sequence[str]) -> str:
    """How many candidates the profile keeps, in which order, and what it left out (grouped by why)."""
    order = "newest" if policy.prefer != "oldest" else "oldest"
    head = f"profile '{policy.name}': {len(cands)} candidate release(s), {order} first"
    if left_out:
        by_reason: dict[str, list[str]] = {}
        for line in left_out:
            version, why = line.split(": ", 1)
            by_reason.setdefault(why, []).append(version)
        head += "; left out by the profile: " + "; ".join(
            f"{', '.join(vs)} ({why})" for why, vs in by_reason.items()
        )
    return head


@dataclass
class _Search:
    """What walking the candidates found: the choice (if any) and everything said on the way."""

    chosen: Optional[Choice] = None
    release: Optional[Release] = None
    rejected: list[Rejection] = field(default_factory=list)
    evaluated: list[tuple[Release, list[Finding], Pick]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _search(cands: Sequence[Release], m: Machine, policy: Policy, gpu_mode: bool, allow_minor_compat: bool,
            restrict_gpus: bool, strict_driver: bool) -> _Search:
    """The first candidate (policy order) that fits every hard constraint, or a flag accepts."""
    s = _Search()
    native: Optional[tuple[Release, list[Finding], Pick]] = None  # the first native-kernel minor-compat one
    for r in cands:
        findings, pick = evaluate(r, m, policy, gpu_mode)
        s.evaluated.append((r, findings, pick))
        fails = failures(findings)
        if gpu_mode and native is None and m.devices and _native_by_minor_compat(findings):
            native = (r, findings, pick)
        if not fails and native is not None and not strict_driver and any(f.jit for f in findings):
            # The strict pick is PTX-JIT only; a newer release has SASS for every GPU and runs
            # through minor-version compatibility: take that one and say why.
            nr, nfs, npick = native
            s.chosen, s.release = _choice(nr, npick, nfs), nr
            s.reasons += [f.text for f in nfs if f.ok or f.kind == "driver"] + [_native_text(nr, r, findings, m)]
            s.rejected = [x for x in s.rejected if x.tensorflow != nr.tensorflow]
            return s
        if not fails:
            s.chosen, s.release = _choice(r, pick, findings), r
            s.reasons += [f.text for f in findings] + (wheel_notes(r, m) if gpu_mode else [])
            s.warnings += [f.text for f in findings if f.jit or f.known_failure]
            return s
        accepted = _accept_with_flag(r, pick, findings, m, allow_minor_compat, restrict_gpus)
        if accepted is not None:
            (s.chosen, extra), s.release = accepted, r
            s.reasons += [f.text for f in findings if f.ok or f.kind == "driver"] + extra
            s.warnings += [f.text for f in findings if f.jit]  # failing GPUs were left out: jit ones passed
            return s
        s.rejected.append(Rejection(r.tensorflow, tuple(f.text for f in fails), summary(fails)))
    return s


def _chosen(found: _Search, cands: Sequence[Release], m: Machine, knowledge: Knowledge, policy: Policy,
            gpu_mode: bool, cpu_mode: bool, reasons: list[str]) -> Resolution:
    """The resolution around a choice: its warnings and the options it did not take."""
    chosen, release = found.chosen, found.release
    assert chosen is not None and release is not None
    warnings = list(found.warnings)
    if gpu_mode:
        chosen, risk = ptxas_upgrade(chosen, m, knowledge.ptxas)
        warnings += risk
    warnings += _release_warnings(release, policy, chosen.python)
    warnings += _mig_warnings(m)
    options = _options(found.evaluated, m, chosen, gpu_mode)
    if chosen.jit_only:
        # An older candidate with SASS for every GPU avoids the JIT: offer it, don't pick it.
        rest = cands[len(found.evaluated):]
        later = next((r for r in rest if _fits_without_jit(r, m, policy)), None)
        if later is not None:
            options.append(f"TF {later.tensorflow} has SASS for every GPU here (no JIT): choose it with "
                           f"a profile file whose tensorflow is '=={later.tensorflow}'")
    return Resolution(
        profile=policy.name,
        choice=chosen,
        reasons=tuple(reasons),
        rejected=tuple(found.rejected),
        options=tuple(options),
        warnings=tuple(warnings),
        cpu_only=cpu_mode,
    )


def _accept_with_flag(
    r: Release, pick: Pick, findings: Sequence[Finding], m: Machine, minor_ok: bool, restrict_ok: bool
) -> Optional[tuple[Choice, list[str]]]:
    fails = failures(findings)
    if minor_ok and all(f.kind == "driver" and f.minor_compat for f in fails) and not any(f.jit for f in findings):
        return _choice(r, pick, findings), [_minor_compat_text(r, m, accepted=True)]
    subset = _gpu_subset(findings, m)
    if restrict_ok and subset is not None:
        keep = [f for f in findings if f.gpu_index is None or f.gpu_index in subset]
        return _choice(r, pick, keep, ",".join(map(str, subset))), [_restrict_text(r, findings, subset, m)]
    return None


def _native_by_minor_compat(findings: Sequence[Finding]) -> bool:
    """Only the driver fails, minor-version compatibility runs it, and every GPU has SASS."""
    fails = failures(findings)
    return (bool(fails) and all(f.kind == "driver" and f.minor_compat for f in fails)
            and not any(f.jit for f in findings) and any(f.kind == "gpu" and f.ok for f in findings))


def _native_text(native: Release, strict: Release, strict_findings: Sequence[Finding], m: Machine) -> str:
    mc = m.minor_compat
    assert mc is not None
    jit_gpus = ", ".join(f"GPU {f.gpu_index}" for f in strict_findings if f.jit)
    return (f"TF {strict.tensorflow}, the newest release driver {m.driver} supports outright, has only PTX for "
            f"{jit_gpus} (JIT-compiled on first use); TF {native.tensorflow} has native kernels (SASS) for every GPU "
            f"here and runs on this driver through CUDA minor-version compatibility ({mc.cuda_major}.x on >= "
            f"{mc.min_driver}, {first_clause(mc.source)}), so it is chosen; --strict-driver keeps TF "
            f"{strict.tensorflow}")


def _gpu_subset(findings: Sequence[Finding], m: Machine) -> Optional[list[int]]:
    """The GPUs `findings` pass on, when GPUs are the only failure and some pass."""
    fails = failures(findings)
    if not fails or any(f.kind != "gpu" for f in fails):
        return None
    bad = {f.gpu_index for f in fails}
    good = [d.gpu.index for d in m.devices if d.gpu.index not in bad]
    return good or None


def _minor_compat_text(r: Release, m: Machine, accepted: bool) -> str:
    mc = m.minor_compat
    assert mc is not None
    base = (f"TF {r.tensorflow} (CUDA {required_cuda(r)}) would run on driver {m.driver} through CUDA "
            f"minor-version compatibility ({mc.cuda_major}.x >= {mc.min_driver}, {first_clause(mc.source)}); PTX JIT "
            "is "
            f"unavailable in that mode")
    if mc.caveat:
        base += f" ({mc.caveat})"
    return base + ("; accepted (--allow-minor-compat)" if accepted else "; run with --allow-minor-compat to accept")


def _restrict_text(r: Release, findings: Sequence[Finding], subset: Sequence[int], m: Machine) -> str:
    bad = {f.gpu_index for f in failures(findings)}
    dropped = ", ".join(d.label.split(" from ")[0] + ")" if " from " in d.label else d.label
                        for d in m.devices if d.gpu.index in bad)
    visible = ",".join(map(str, subset))
    unsupported = {i for i, _, _ in m.dropped}
    why = ("which this driver no longer supports" if bad <= unsupported
           else f"which has no kernels in TF {r.tensorflow}")
    return (f"TF {r.tensorflow} would run on GPU {visible} alone with CUDA_VISIBLE_DEVICES={visible}, "
            f"leaving out {dropped}, {why}")


def _options(
    evaluated: Sequence[tuple[Release, list[Finding], Pick]], m: Machine, chosen: Optional[Choice], gpu_mode: bool
) -> list[str]:
    if not gpu_mode:
        return []
    out: list[str] = []
    ahead = evaluated if chosen is None else evaluated[:-1]
    minor = next(
        (r for r, fs, _ in ahead
         if failures(fs) and all(f.kind == "driver" and f.minor_compat for f in failures(fs))
         and not any(f.jit for f in fs)),
        None,
    )
    if minor is not None and not (chosen and chosen.tensorflow == minor.tensorflow):
        out.append(_minor_compat_text(minor, m, accepted=False))
    wsl = next((r for r, fs, _ in ahead if {f.kind for f in failures(fs)} == {"os"}), None)
    if wsl is not None:
        out.append(f"TF {wsl.tensorflow} fits everything but native Windows: run it under WSL2 with the Windows "
                   f"NVIDIA driver (TensorFlow after {WINDOWS_NATIVE_GPU_LAST} uses the GPU only there)")
    sub = next(((r, fs, s) for r, fs, _ in ahead if (s := _gpu_subset(fs, m))), None)
    if sub is not None and not (chosen and chosen.visible_devices):
        r, fs, s = sub
        out.append(_restrict_text(r, fs, s, m) + " (pass --restrict-gpus to accept)")
    return out


def _fits_without_jit(r: Release, m: Machine, policy: Policy) -> bool:
    findings, _ = evaluate(r, m, policy, gpu_mode=True)
    return not failures(findings) and not any(f.jit for f in findings)


def _mig_warnings(m: Machine) -> list[str]:
    if any(d.gpu.mig for d in m.devices):
        return ["MIG is enabled: TensorFlow sees at most one MIG instance per process; pick it with "
                "CUDA_VISIBLE_DEVICES=MIG-<uuid> (from `nvidia-smi -L`)"]
    return []


def _remedies(
    evaluated: Sequence[tuple[Release, list[Finding], Pick]], m: Machine, knowledge: Knowledge, gpu_mode: bool
) -> list[str]:
    out: list[str] = []

    def kinds(fs: Sequence[Finding]) -> set[str]:
        return {f.kind for f in failures(fs)}

    # A newer driver: the newest release whose only failure is the driver.
    drv = next((r for r, fs, _ in evaluated if kinds(fs) == {"driver"}), None)
    if drv is not None:
        out.append(_driver_remedy(drv, knowledge, m))
    if evaluated and all("arch" in kinds(fs) for _, fs, _ in evaluated):
        out += arm_remedies(m)
    if any(kinds(fs) == {"os"} for _, fs, _ in evaluated):
        out.append(f"use WSL2 (Windows Subsystem for Linux) with the Windows NVIDIA driver: TensorFlow after "
                   f"{WINDOWS_NATIVE_GPU_LAST} runs on the GPU only there")
    py = next((r for r, fs, _ in evaluated if kinds(fs) == {"python"}), None)
    if py is not None:
        out.append(f"install Python {max(py.pythons, key=version_key)} (TF {py.tensorflow} supports "
                   f"{span(py.pythons)}) or conda/micromamba to provide it, then run plan again")
    if gpu_mode:
        out += _failure_remedies(evaluated, m)
    if gpu_mode and all("gpu" in kinds(fs) for _, fs, _ in evaluated) and evaluated:
        known = {f.gpu_index for _, fs, _ in evaluated for f in failures(fs) if f.failure}
        bad = {f.gpu_index for _, fs, _ in evaluated for f in failures(fs) if f.kind == "gpu"} - known
        devices = [d for d in m.devices if d.gpu.index in bad]
        names = [f"GPU {d.gpu.index} ({d.gpu.name}, cc {d.cc})" for d in devices if not _before_tf(d.cc)]
        never = [f"GPU {d.gpu.index} ({d.gpu.name}, cc {d.cc})" for d in devices if _before_tf(d.cc)]
        if names:
            out.append(f"{', '.join(names)}: no prebuilt TensorFlow GPU release in this profile has kernels for "
                       f"it; build TensorFlow from source for its compute capability, or use the CPU")
        if never:
            out.append(f"{', '.join(never)}: no TensorFlow release, prebuilt or built from source, runs on "
                       f"it (TensorFlow's GPU support starts at compute capability 3.0); use the CPU")
    cpu = next((r for r, fs, _ in evaluated if kinds(fs) <= {"driver", "gpu", "cuda", "defect"}), None)
    if cpu is not None:
        out.append(f"CPU-only TensorFlow: pip install tensorflow=={cpu.tensorflow} (no GPU acceleration)")
    return out


def _failure_remedies(evaluated: Sequence[tuple[Release, list[Finding], Pick]], m: Machine) -> list[str]:
    """What runs on a GPU where releases were rejected for a known failure (the rows' runs_instead)."""
    out = []
    for fid in dict.fromkeys(f.failure for _, fs, _ in evaluated for f in failures(fs) if f.failure):
        row = next((r for r in m.failures if r.id == fid), None)
        gpus = sorted({f.gpu_index for _, fs, _ in evaluated for f in failures(fs) if f.failure == fid
                       and f.gpu_index is not None})
        if row is not None and row.runs_instead:
            out.append(f"GPU {', '.join(map(str, gpus))}: releases with known failure {row.id} were left out; "
                       f"what runs there: " + "; ".join(row.runs_instead))
    return out


# TensorFlow for AMD GPUs: AMD's ROCm build, on PyPI as tensorflow-rocm (not something this tool installs).
TENSORFLOW_ROCM = "https://pypi.org/project/tensorflow-rocm/"


def _other_vendor_remedies(others: Sequence[str]) -> list[str]:
    """A machine whose GPUs are another vendor's: no NVIDIA driver helps it."""
    amd = [o for o in others if o.startswith("AMD ")]
    out = [f"the GPU here is not NVIDIA ({', '.join(others)}): tfgpu-install sets up TensorFlow on NVIDIA CUDA "
           "only, and no NVIDIA driver would help"]
    if amd:
        out.append(f"for the AMD GPU ({', '.join(amd)}): TensorFlow runs on AMD GPUs through AMD's ROCm build, "
                   f"tensorflow-rocm ({TENSORFLOW_ROCM}), installed by its own instructions")
    return out


def _before_tf(cc: Optional[str]) -> bool:
    """A compute capability below 3.0 (Tesla architecture, Fermi): TensorFlow never had GPU kernels
    for it (its GPU docs start at 3.0, and CUDA 9, which TF 1.5+ needs, dropped Fermi)."""
    return cc is not None and version_key(cc) < version_key("3.0")


def _driver_remedy(r: Release, knowledge: Knowledge, m: Machine) -> str:
    need = required_cuda(r) or "?"
    row = min_driver_for(knowledge.drivers, need)
    now = f" (now: {m.driver})" if m.driver else ""
    if row is None:
        return f"install an NVIDIA driver that supports CUDA {need} to run TF {r.tensorflow}{now}"
    where = " on the Windows host (never install a Linux driver inside WSL2)" if m.wsl else ""
    return (f"install NVIDIA driver >= {row.min_driver}{where} (CUDA {row.cuda}, {first_clause(row.source)}){now} "
            f"to run TF {r.tensorflow} (CUDA {need})")


def _no_gpu(
    facts: Facts, knowledge: Knowledge, policy: Policy, m: Machine, cands: Sequence[Release], reasons: list[str]
) -> Resolution:
    """No usable GPU and no --allow-cpu: no choice; say what is missing and how to get on."""
    d = facts.driver
    if m.devices and m.driver is None:
        why = ("an NVIDIA GPU is present but no NVIDIA driver answered"
               + (f" (driver {d.version} installed but not loaded)" if d.version and not d.loaded else ""))
    elif facts.gpus and not m.devices:
        why = "every NVIDIA GPU is hidden by CUDA_VISIBLE_DEVICES"
    elif facts.gpu_on_pci:
        why = "an NVIDIA GPU is on the PCI bus but no NVIDIA driver answered"
    else:
        # the sources by name; what each said is in the probe's notes (printed once, not again here)
        tried = ", ".join(dict.fromkeys(t.source for t in facts.sources_tried))
        why = f"no NVIDIA GPU found (asked: {tried or d.source or 'nvidia-smi, NVML, lspci'})"
        if facts.other_gpus:
            why += f"; the display devices here are {', '.join(facts.other_gpus)}"
    reasons.append(why)
    remedies: list[str] = [r for r in arm_remedies(m) if m.tegra and "--allow-cpu" not in r]
    if m.devices or facts.gpu_on_pci:
        # What driver the best release would need, judged with the GPU's compute capability.
        fake = replace(m, driver="999999", max_cuda="999.0", minor_compat=None)
        for r in cands:
            fs, _ = evaluate(r, fake, policy, gpu_mode=bool(fake.devices))
            if not failures(fs):
                remedies.append(_driver_remedy(r, knowledge, m))
                break
        if not remedies:
            remedies.append("install the NVIDIA driver for this GPU (nvidia-smi must work), then run plan again")
    elif facts.other_gpus:
        remedies += _other_vendor_remedies(facts.other_gpus)
    else:
        remedies.append("if this machine has an NVIDIA GPU, install its driver (nvidia-smi must work), then run "
                        "plan again")
    if facts.gpus and not m.devices:
        remedies.append("unset CUDA_VISIBLE_DEVICES (or list the GPUs to use) and run plan again")
    remedies.append("to install and verify on the CPU only (no GPU acceleration), add --allow-cpu")
    return Resolution(profile=policy.name, choice=None, reasons=tuple(reasons), rejected=(), remedies=tuple(remedies))
