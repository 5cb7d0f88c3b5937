"""The resolver's checks: one Finding per hard constraint for one release on one machine (pure).

Used by tfgpu_install.resolver.resolve, which walks the candidates, picks, and explains. Each Finding
says in plain words what was checked and where each fact came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date
from typing import Iterable, Optional, Sequence

from tfgpu_install.facts.model import Facts, Gpu, PythonInterp
from tfgpu_install.knowledge.gpu_rules import (
    below,
    failure_text,
    floor_text,
    known_failure,
    lacks_kernels,
    last_with_kernels,
)
from tfgpu_install.knowledge.model import (
    Defect,
    DriverRow,
    FloorRow,
    GpuRow,
    Knowledge,
    KnownFailure,
    MinorCompatRow,
    Policy,
    Release,
    release_key,
    version_key,
)
from tfgpu_install.verify.gpucheck.tfgpucheck_arch import coverage

# TensorFlow's last release with GPU support on native Windows (later: WSL2 only).
# Source: https://www.tensorflow.org/install/pip#windows-native ("TensorFlow 2.10 was the
# last TensorFlow release that supported GPU on native-Windows").
WINDOWS_NATIVE_GPU_LAST = "2.10"
# Packages whose own version is the CUDA version they carry (cuBLAS, cuDNN... are not).
_CUDA_VERSIONED = re.compile(r"^nvidia-cuda-(runtime|nvcc|nvrtc|cupti)-cu\d+$")
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


# --- small pure helpers ---------------------------------------------------------------


def _ge(a: str, b: str) -> bool:
    return version_key(a) >= version_key(b)


def major_minor(version: str) -> str:
    key = version_key(version)
    return ".".join(str(p) for p in (key + (0, 0))[:2])


def required_cuda(release: Release) -> Optional[str]:
    """The CUDA the driver must support: the build CUDA, or for pip-provided CUDA the
    newest CUDA among its pinned nvidia-cuda-* wheels (whichever is newer)."""
    versions = [release.cuda] if release.cuda else []
    # "wheels" (TF < 2.14): the installer's newer 11.x wheels run the build's CUDA through minor-version
    # compatibility; the driver must still support the build's CUDA (userspace.wheel_notes says so).
    if release.cuda_from == "pip" and release.pins_kind != "wheels":
        versions += [major_minor(v) for name, v in release.pins.items() if _CUDA_VERSIONED.match(name)]
    versions = [v for v in versions if version_key(v)]
    return max(versions, key=version_key) if versions else None


def max_cuda_from_table(drivers: Iterable[DriverRow], driver_version: str) -> Optional[DriverRow]:
    """The newest CUDA whose minimum driver is <= driver_version (NVIDIA's toolkit table)."""
    fits = [row for row in drivers if _ge(driver_version, row.min_driver)]
    return max(fits, key=lambda r: version_key(r.cuda)) if fits else None


def min_driver_for(drivers: Iterable[DriverRow], cuda: str) -> Optional[DriverRow]:
    """The row of the oldest CUDA >= `cuda` (the minimum driver that runs it natively)."""
    rows = [row for row in drivers if version_key(row.cuda) >= version_key(cuda)]
    return min(rows, key=lambda r: version_key(r.cuda)) if rows else None


def minor_compat_row(rows: Iterable[MinorCompatRow], driver_version: str) -> Optional[MinorCompatRow]:
    fits = [row for row in rows if _ge(driver_version, row.min_driver)]
    return max(fits, key=lambda r: version_key(r.cuda_major)) if fits else None


def gpu_coverage(cc: str, release: Release) -> tuple[str, Optional[str]]:
    """How `release` runs on compute capability `cc`: ("sass", "8.0"), ("ptx", "9.0") or ("none", None).

    The rule is the in-env GPU check's own (tfgpucheck_arch.coverage), so plan and verify agree:
    SASS runs on the same major at or above its minor (cc 8.6 runs sm_80); PTX is JIT-compiled
    by the driver for any GPU at or above it.
    """
    return coverage(cc, release.sass, release.ptx)


def span(versions: Sequence[str]) -> str:
    ordered = sorted(versions, key=version_key)
    if not ordered:
        return "none"
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"


def _src(release: Release, field: str) -> str:
    """Where a release's field came from, cut to its first clause (the full text is in matrix.yaml)."""
    full = release.sources.get(field) or release.sources.get("default") or release.source
    return first_clause(full) if full else f"{'learned.yaml' if release.learned else 'matrix.yaml'}:{release.line}"


def first_clause(text: str) -> str:
    cut = min((i for i in (text.find(" ("), text.find("; "), text.find(" [")) if i > 0), default=len(text))
    return text[:cut].strip()


def _gpu_label(gpu: Gpu, cc: Optional[str], cc_source: Optional[str]) -> str:
    where = f" from {cc_source}" if cc_source else ""
    return f"GPU {gpu.index} ({gpu.name}, cc {cc or 'unknown'}{where})"


# --- candidates -------------------------------------------------------------------------


def _age_days(released: Optional[str], today: date) -> Optional[int]:
    try:
        return (today - date.fromisoformat(str(released)[:10])).days if released else None
    except ValueError:
        return None


def _spec_allows(spec: str, version: str) -> bool:
    from packaging.specifiers import SpecifierSet  # lazy: only user/legacy policies use it

    return SpecifierSet(spec).contains(version, prereleases=True)


def _learned_refused(r: Release, policy: Policy, age: Optional[int]) -> str:
    """Why the profile does not take this learned (not curated) release yet; "" when it does."""
    if policy.learned == "any":
        return ""
    what = "learned from the package index, not curated"
    if policy.learned == "never":
        return f"{what}; the profile takes curated releases only"
    patched = (release_key(r.tensorflow) + (0, 0, 0))[2] >= 1
    old = not policy.min_age_days or (age is not None and age >= policy.min_age_days)
    if patched and old:
        return ""
    need = "a patch release" + (f" at least {policy.min_age_days} days old" if policy.min_age_days else "")
    return f"{what}; the profile takes such a release once it is {need}"


def _effective_date(r: Release) -> Optional[str]:
    """A learned release is as old as the later of its upload date and the day this tool first read it:
    an index that dates a fresh release 2001-01-01 does not make it settled (issue #39)."""
    if not r.learned:
        return r.released
    if not r.first_seen:
        return None  # learned before the tool kept the day: its age is unknown, so it is not settled
    return max(d for d in (r.released, r.first_seen) if d)


def candidates(
    knowledge: Knowledge, policy: Policy, today: Optional[date] = None
) -> tuple[list[Release], list[str]]:
    """The releases the policy keeps, in its order, and one line per release it leaves out."""
    today = today or date.today()
    newest_in_series: dict[tuple[int, ...], tuple[int, ...]] = {}
    finals = [r for r in knowledge.releases if not r.prerelease]
    for r in finals:
        series = version_key(r.tensorflow)[:2]
        newest_in_series[series] = max(newest_in_series.get(series, ()), version_key(r.tensorflow))
    newest_series = max(newest_in_series, default=())
    kept: list[Release] = []
    left_out: list[str] = []
    for r in knowledge.releases:
        key = version_key(r.tensorflow)
        age = _age_days(_effective_date(r), today)
        old_enough = age is not None and policy.min_age_days > 0 and age >= policy.min_age_days
        why = None
        if r.prerelease and not policy.prereleases:
            why = "a pre-release; the preview profile may pick it (--profile preview)"
        elif r.learned and _learned_refused(r, policy, age):
            why = _learned_refused(r, policy, age)
        elif policy.tensorflow and not _spec_allows(policy.tensorflow, r.tensorflow):
            why = f"outside the profile's range {policy.tensorflow}"
        elif r.cuda_from not in policy.cuda_from:
            why = f"gets CUDA from {r.cuda_from}; the profile takes {' or '.join(policy.cuda_from)}"
        elif policy.require_patch_release and not r.prerelease:
            # settled: a patch release itself, a later patch in its line, a later line, or old enough
            settled = (
                (key + (0, 0, 0))[2] >= 1
                or newest_in_series[key[:2]] != key
                or key[:2] != newest_series
                or old_enough
            )
            if not settled:
                why = "an x.y.0 release with no patch release or newer line yet" + (
                    f", {age} days old (< {policy.min_age_days})" if age is not None and policy.min_age_days else ""
                )
        elif policy.min_age_days and age is not None and age < policy.min_age_days:
            why = (f"released {_effective_date(r) or '?'}, "
                   f"younger than the profile's {policy.min_age_days} days")
        if why:
            left_out.append(f"{r.tensorflow}: {why}")
        else:
            kept.append(r)
    kept.sort(key=lambda r: release_key(r.tensorflow), reverse=policy.prefer != "oldest")
    return kept, left_out


# --- the machine, as the resolver sees it -----------------------------------------------


@dataclass(frozen=True)
class Device:
    gpu: Gpu
    cc: Optional[str]
    cc_source: Optional[str]

    @property
    def label(self) -> str:
        return _gpu_label(self.gpu, self.cc, self.cc_source)


@dataclass(frozen=True)
class Machine:
    devices: tuple[Device, ...]  # visible GPUs
    driver: Optional[str]
    driver_source: str
    max_cuda: Optional[str]
    max_cuda_source: str
    minor_compat: Optional[MinorCompatRow]
    pythons: dict[str, PythonInterp]  # "3.11" -> interpreter (newest patch found)
    conda: Optional[str]  # what can provide a Python that is not here
    glibc: Optional[str]
    arch: str
    windows: bool
    notes: tuple[str, ...]  # facts worth saying once (visible devices, unknown cc ...)
    wsl: bool = False
    dropped: tuple[tuple[int, str, str], ...] = ()  # (GPU index, why, short): the driver no longer drives it
    tegra: Optional[str] = None  # a Jetson ("L4T R35.4.1; NVIDIA Jetson AGX Orin ...") and where that came from
    # kernels.yaml: which library releases have kernels for which GPUs, and the known failures
    floors: tuple[FloorRow, ...] = ()
    failures: tuple[KnownFailure, ...] = ()

    @property
    def gpu_ready(self) -> bool:
        return bool(self.devices) and self.driver is not None


def _visible(gpus: Sequence[Gpu], cvd: Optional[str]) -> tuple[list[Gpu], Optional[str]]:
    """Apply CUDA_VISIBLE_DEVICES (indices or GPU-/MIG- UUID prefixes) to the probed GPUs."""
    if cvd is None:
        return list(gpus), None
    tokens = [t.strip() for t in cvd.split(",") if t.strip()]
    if not tokens or tokens[0] in ("-1", "NoDevFiles"):
        return [], f"CUDA_VISIBLE_DEVICES={cvd!r} (environment) hides every GPU"
    picked: list[Gpu] = []
    for tok in tokens:
        if tok.isascii() and tok.isdigit():  # "²" is a digit to str.isdigit, not to int()
            found = [g for g in gpus if g.index == int(tok)]
        elif tok.startswith(("GPU-", "MIG-")):
            found = [g for g in gpus if g.uuid and (g.uuid.startswith(tok) or tok.startswith("MIG-"))]
        else:
            return list(gpus), f"CUDA_VISIBLE_DEVICES={cvd!r} (environment) not understood: considering every GPU"
        if not found:
            break  # CUDA stops at the first invalid entry
        picked += [g for g in found if g not in picked]
    considered = ", ".join(str(g.index) for g in picked) or "none"
    return picked, f"CUDA_VISIBLE_DEVICES={cvd} (environment): considering GPU {considered}"


def visible_gpus(facts: Facts) -> list[Gpu]:
    """The probed GPUs that CUDA_VISIBLE_DEVICES leaves visible."""
    return _visible(facts.gpus, facts.cuda_visible_devices)[0]


def has_usable_gpu(facts: Facts) -> bool:
    """A visible GPU and a loaded driver that answered with its version."""
    return bool(visible_gpus(facts)) and bool(facts.driver.version) and facts.driver.loaded


def machine_view(facts: Facts, knowledge: Knowledge, conda_available: bool) -> Machine:
    notes: list[str] = []
    gpus, cvd_note = _visible(facts.gpus, facts.cuda_visible_devices)
    if cvd_note:
        notes.append(cvd_note)
    devices = []
    for g in gpus:
        cc, cc_src = g.compute_capability, g.cc_source or g.source
        if not cc:
            row = _gpu_row(knowledge, g.name)
            if row:
                cc, cc_src = row.compute_capability, f"table:gpus.yaml ({row.source})"
            else:
                notes.append(
                    f"GPU {g.index} ({g.name}): compute capability unknown; not checked "
                    f"(pass --assume-gpu CC to plan with it)"
                )
        devices.append(Device(g, cc, cc_src))
    d = facts.driver
    driver = d.version if d.version and d.loaded else None
    max_cuda, max_src = (d.max_cuda, d.max_cuda_source or d.source or "probe") if driver else (None, "")
    if driver and not max_cuda:
        drow = max_cuda_from_table(knowledge.drivers, driver)
        if drow:
            max_cuda, max_src = drow.cuda, f"table:drivers.yaml, {first_clause(drow.source)}"
    if driver and facts.host.wsl and max_src.startswith("table:"):
        notes.append(f"WSL2: driver {driver} is the Windows host driver; its CUDA limit comes from NVIDIA's Linux "
                     f"driver table, and the Windows table's minimums run slightly higher, so an update of the "
                     f"Windows driver is the fix if CUDA initialisation fails")
    dropped = _dropped_gpus(devices, driver, knowledge)
    notes += [f"{why}; --restrict-gpus leaves it out" for _, why, _ in dropped]
    pythons: dict[str, PythonInterp] = {}
    for p in facts.pythons:
        cur = pythons.get(p.minor)
        if cur is None or version_key(p.version) > version_key(cur.version):
            pythons[p.minor] = p
    t = facts.tools
    conda = t.micromamba or t.mamba or t.conda or ("conda (can be set up)" if conda_available else None)
    arch = _ARCH_ALIASES.get(facts.host.arch.lower(), facts.host.arch)
    return Machine(
        devices=tuple(devices),
        driver=driver,
        driver_source=d.source or "probe",
        max_cuda=max_cuda,
        max_cuda_source=max_src,
        minor_compat=minor_compat_row(knowledge.minor_compat, driver) if driver else None,
        pythons=pythons,
        conda=conda,
        glibc=facts.host.glibc,
        arch=arch,
        windows=(facts.host.os_id or "").lower() == "windows",
        notes=tuple(notes),
        wsl=facts.host.wsl,
        dropped=tuple(dropped),
        tegra=f"{facts.host.tegra} ({facts.host.tegra_source})" if facts.host.tegra else None,
        floors=knowledge.floors,
        failures=knowledge.known_failures,
    )


def _dropped_gpus(devices: Sequence[Device], driver: Optional[str],
                  knowledge: Knowledge) -> list[tuple[int, str, str]]:
    """GPUs whose architecture's last driver branch is older than the installed driver."""
    from tfgpu_install.resolver.hardware import dropped_by_driver

    out = []
    for dev in devices:
        row = dropped_by_driver(knowledge.architectures, dev.cc, driver) if dev.cc and driver else None
        if row is not None:
            out.append((dev.gpu.index, f"{dev.label} is {row.architecture}: driver {driver} is newer than "
                        f"R{row.last_branch}, the last branch that supports {row.architecture} "
                        f"({first_clause(row.source)}), so it is unsupported by that driver",
                        f"GPU {dev.gpu.index} {row.architecture}: unsupported by driver {driver}"))
    return out


def _gpu_row(knowledge: Knowledge, name: str) -> Optional[GpuRow]:
    from tfgpu_install.knowledge.gpu_names import gpu_by_name

    return gpu_by_name(knowledge, name)


# --- checking one release ---------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    kind: str  # driver | gpu | python | glibc | arch | os | defect | cuda
    ok: bool
    text: str
    gpu_index: Optional[int] = None
    jit: bool = False  # ok, but only through PTX JIT
    minor_compat: bool = False  # failed on driver, but minor-version compatibility would run it
    short: str = ""  # a few words for the human table of rejections
    known_failure: bool = False  # ok only because the user named the release (--tensorflow): a warning
    pin: Optional[tuple[str, str, str]] = None  # (wheel, version, "sha256:...") the choice must pin instead
    failure: Optional[str] = None  # the kernels.yaml known failure that rejected it (its id)


@dataclass(frozen=True)
class Pick:
    python: Optional[str]
    python_path: Optional[str]


def _check_driver(r: Release, m: Machine) -> list[Finding]:
    need = required_cuda(r)
    tf = r.tensorflow
    if need is None:
        return [Finding("cuda", False, f"TF {tf} has no CUDA build ({_src(r, 'cuda')})", short="no CUDA build")]
    need_txt = f"TF {tf} needs CUDA {need} ({_src(r, 'cuda')})"
    if m.driver is None:
        return [Finding("driver", False, f"{need_txt}, but no NVIDIA driver is loaded", short="no driver")]
    if m.max_cuda is None:
        return [Finding("driver", False, f"{need_txt}, but driver {m.driver} ({m.driver_source}) is older than "
                        f"every CUDA release in drivers.yaml", short="driver older than any CUDA")]
    if version_key(need) <= version_key(m.max_cuda):
        return [Finding("driver", True, f"{_driver_txt(m)}; {need_txt}")]
    mc = m.minor_compat
    compat = mc is not None and version_key(need)[:1] == version_key(mc.cuda_major)[:1]
    return [Finding("driver", False, f"{need_txt}, but {_driver_txt(m)}", minor_compat=compat,
                    short=f"CUDA {need} > driver's {m.max_cuda}")]


def _driver_txt(m: Machine) -> str:
    """'driver 535.104.05 supports CUDA <= 12.2 (nvidia-smi)', naming both sources when they differ."""
    if m.driver_source == m.max_cuda_source:
        return f"driver {m.driver} supports CUDA <= {m.max_cuda} ({m.max_cuda_source})"
    return f"driver {m.driver} ({m.driver_source}) supports CUDA <= {m.max_cuda} ({m.max_cuda_source})"


def _check_gpus(r: Release, m: Machine, policy: Policy) -> list[Finding]:
    out = []
    tf = r.tensorflow
    unknown = not r.sass and not r.ptx and ("sass" in r.unconfirmed or "ptx" in r.unconfirmed)
    for dev in m.devices:
        if not dev.cc:
            continue
        if unknown:  # never guess that kernels exist: an unverifiable GPU constraint is not met
            out.append(Finding("gpu", False, f"{dev.label}: TF {tf}'s compiled compute capabilities are not "
                               f"confirmed from a source (matrix.yaml: unconfirmed), so support for cc {dev.cc} "
                               f"cannot be checked", dev.gpu.index, short="kernel list unconfirmed"))
            continue
        how, arch = gpu_coverage(dev.cc, r)
        failure = known_failure(m.failures, tf, dev.cc, has_sass=how == "sass")
        if failure is not None:
            out.append(_failure_finding(r, dev, failure, how, policy))
        elif how == "sass":
            out.append(Finding("gpu", True, f"{dev.label}: runs TF {tf}'s sm_{(arch or '').replace('.', '')} SASS "
                               f"(ahead-of-time kernels; {_src(r, 'sass')})", dev.gpu.index))
        elif how == "ptx":
            msg = (f"{dev.label}: TF {tf} has no SASS for it (SASS: {', '.join(r.sass) or 'none'}), only "
                   f"compute_{(arch or '').replace('.', '')} PTX, which the driver JIT-compiles on first run: that "
                   "takes minutes")
            if policy.jit_only_ok:
                out.append(Finding("gpu", True, msg, dev.gpu.index, jit=True))
            else:
                out.append(Finding("gpu", False, msg + "; the profile does not accept JIT-only GPUs", dev.gpu.index,
                                   short=f"GPU {dev.gpu.index} cc {dev.cc}: JIT only (refused)"))
        else:
            out.append(Finding("gpu", False, f"{dev.label}: no SASS or PTX <= {dev.cc} in TF {tf} "
                               f"(SASS: {', '.join(r.sass) or 'none'}; PTX: {', '.join(r.ptx) or 'none'}; "
                               f"{_src(r, 'sass')})", dev.gpu.index,
                               short=f"GPU {dev.gpu.index} cc {dev.cc}: no kernels"))
    return out


def _failure_finding(r: Release, dev: Device, row: KnownFailure, how: str, policy: Policy) -> Finding:
    """A release known to fail on this GPU: rejected, or (the user named it) installed with the failure
    as a warning; never offered as "JIT only"."""
    kernels = f"SASS: {', '.join(r.sass) or 'none'}; PTX: {', '.join(r.ptx) or 'none'}; {_src(r, 'sass')}"
    text = f"{dev.label}: TF {r.tensorflow} ({kernels}): {failure_text(row)}"
    if policy.explicit:
        return Finding("gpu", True, text + "; installed as asked (--tensorflow), expect it to fail on this GPU",
                       dev.gpu.index, known_failure=True)
    return Finding("gpu", False, text, dev.gpu.index, failure=row.id,
                   short=f"GPU {dev.gpu.index} cc {dev.cc}: known failure {row.id}" + (" (inferred)" * row.inferred))


# --- library floors: cuDNN >= 9.11 and CUDA 13 have no kernels for cc < 7.5 ---------------------------

_CUDNN = re.compile(r"^nvidia-cudnn-cu\d+$")


def _check_floors(r: Release, m: Machine) -> list[Finding]:
    """The CUDA and cuDNN a release brings against every GPU's compute capability (kernels.yaml floors)."""
    old = [d for d in m.devices if d.cc and any(f.library in ("cuda", "cudnn") and below(d.cc, f.min_cc)
                                                for f in m.floors)]
    if not old:
        return []
    out: list[Finding] = []
    cuda = _cuda_major_minor(r)
    for dev in old:
        row = lacks_kernels(m.floors, "cuda", cuda, dev.cc or "")
        if row is not None:
            out.append(Finding("gpu", False, f"{dev.label}: TF {r.tensorflow} needs CUDA {cuda}: "
                               f"{floor_text(row)}", dev.gpu.index,
                               short=f"GPU {dev.gpu.index} cc {dev.cc}: CUDA {cuda} has no kernels"))
    name = next((n for n in r.pins if _CUDNN.match(n)), None)
    if name is not None and r.cuda_from == "pip":
        out += _cudnn_floor(r, name, old, m.floors)
    return out


def _cuda_major_minor(r: Release) -> Optional[str]:
    """The CUDA the release's libraries come from: the newer of its build CUDA and its -cuNN pins."""
    need = required_cuda(r)
    majors = [int(m.group(1)) for n in r.pins if (m := re.search(r"-cu(\d+)$", n))]
    if majors and (need is None or max(majors) > version_key(need)[0]):
        return f"{max(majors)}.0"
    return need


def _cudnn_floor(r: Release, name: str, old: Sequence[Device], floors: Sequence[FloorRow]) -> list[Finding]:
    """The cuDNN pin against the oldest GPU: kept when it has its kernels (and said why, when the release's
    range would allow one that has not), lowered to the newest that has them, or the release rejected."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    pin = r.pins[name]
    low = min(old, key=lambda d: version_key(d.cc or "0"))
    gpus = ", ".join(d.label for d in old)
    row = last_with_kernels(floors, "cudnn", low.cc or "0")
    if row is None:
        return []
    spec = r.extra_requires.get(name) or f"=={pin}"
    try:
        allowed = SpecifierSet(spec)
    except InvalidSpecifier:
        allowed = SpecifierSet(f"=={pin}")
    if lacks_kernels(floors, "cudnn", pin, low.cc or "0") is None:
        if not allowed.contains(row.since, prereleases=True):
            return []  # the range stops below the floor: nothing to say
        return [Finding("gpu", True, f"{gpus}: cuDNN {pin} (TF {r.tensorflow}'s pin) has kernels for cc "
                        f"{low.cc}; {name}{spec} would also allow cuDNN >= {row.since}, which has none: "
                        f"{floor_text(row)}", low.gpu.index)]
    wheel, _, last = row.wheel.partition("==")
    if wheel == name and last and allowed.contains(last, prereleases=True):
        return [Finding("gpu", True, f"{gpus}: cuDNN {pin} (TF {r.tensorflow}'s pin) has no kernels for cc "
                        f"{low.cc}, so the plan pins {name}=={last}, the newest in {spec} that has them: "
                        f"{floor_text(row)}", low.gpu.index, pin=(name, last, row.sha256))]
    return [Finding("gpu", False, f"{gpus}: no cuDNN in TF {r.tensorflow}'s range {name}{spec} has kernels "
                    f"for cc {low.cc}: {floor_text(row)}", low.gpu.index,
                    short=f"GPU {low.gpu.index} cc {low.cc}: no cuDNN in range has kernels")]


def defect_applies(d: Defect, r: Release, python: Optional[str]) -> bool:
    """A defect limited to an install path or to some Pythons applies only there."""
    if d.path and d.path != r.cuda_from:
        return False
    return not d.pythons or python is None or python in d.pythons


def _pick_python(r: Release, m: Machine, avoid: frozenset[str] = frozenset()) -> tuple[Finding, Pick]:
    """The newest supported Python here (else one conda provides); `avoid`: Pythons a blocking defect hits."""
    tf = r.tensorflow
    usable = [p for p in r.pythons if p not in avoid]
    if avoid and not usable:
        return Finding("defect", False, f"TF {tf}: a known defect blocks every Python it supports "
                       f"({', '.join(sorted(avoid))})", short="defect (all Pythons)"), Pick(None, None)
    r = replace(r, pythons=tuple(usable))
    here = sorted((p for p in r.pythons if p in m.pythons), key=version_key)
    if here:
        interp = m.pythons[here[-1]]
        path = None if interp.source.startswith("override") else interp.path
        where = f"found at {interp.path} ({interp.source})" if path else f"given ({interp.source})"
        text = f"Python {here[-1]} is supported by TF {tf} ({span(r.pythons)}) and {where}"
        if len(here) > 1:  # say why this one and not the user's default python3
            text += f": the newest of the supported ones here ({', '.join(here)}); --python X.Y picks another"
        return Finding("python", True, text), Pick(here[-1], path)
    found = ", ".join(sorted(m.pythons, key=version_key)) or "none"
    if r.pythons and m.conda:
        best = max(r.pythons, key=version_key)
        text = (f"TF {tf} supports Python {span(r.pythons)}; none is on this machine (found: {found}), "
                f"so conda ({m.conda}) will provide Python {best}")
        return Finding("python", True, text), Pick(best, None)
    text = (f"TF {tf} supports Python {span(r.pythons)}; this machine has {found} and no conda/mamba to "
            f"provide another")
    return Finding("python", False, text, short=f"Python {span(r.pythons)} not here"), Pick(None, None)


def _check_host(r: Release, m: Machine) -> list[Finding]:
    out = []
    tf = r.tensorflow
    if m.arch not in r.arches:
        out.append(Finding("arch", False, f"TF {tf} has no {m.arch} wheel (only {', '.join(r.arches)})",
                           short=f"no {m.arch} wheel"))
    if m.windows:
        if version_key(tf)[:2] > version_key(WINDOWS_NATIVE_GPU_LAST):
            out.append(Finding("os", False, f"TF {tf} has no native-Windows GPU build (the last was TF "
                               f"{WINDOWS_NATIVE_GPU_LAST}); use WSL2 for newer releases",
                               short="no native-Windows GPU build"))
        return out  # glibc does not apply on Windows
    if m.glibc is None:
        return out
    if _ge(m.glibc, r.min_glibc):
        out.append(Finding("glibc", True, f"glibc {m.glibc} (host) >= {r.min_glibc} required by the "
                           f"{r.manylinux} wheel"))
    else:
        out.append(Finding("glibc", False, f"TF {tf}'s {r.manylinux} wheel needs glibc >= {r.min_glibc}; this "
                           f"machine has {m.glibc}", short=f"glibc {m.glibc} < {r.min_glibc}"))
    return out


def _check_defects(r: Release, policy: Policy, python: Optional[str]) -> list[Finding]:
    return [
        Finding("defect", policy.allow_defects, f"TF {r.tensorflow}: known defect {d.id}: {d.text} ({d.source})",
                short=f"defect {d.id}")
        for d in r.blocking_defects
        if defect_applies(d, r, python)
    ]


def evaluate(r: Release, m: Machine, policy: Policy, gpu_mode: bool) -> tuple[list[Finding], Pick]:
    """Every constraint's finding for one release (all of them, passing and failing)."""
    findings: list[Finding] = []
    if gpu_mode:
        findings += _check_driver(r, m)
        findings += _check_gpus(r, m, policy)
        findings += _check_floors(r, m)
        findings += [Finding("gpu", False, why, index, short=short) for index, why, short in m.dropped]
    # Pythons that only a blocking defect rules out are avoided, so another Python can still fit.
    avoid = frozenset(
        p for d in r.blocking_defects if gpu_mode and not policy.allow_defects and d.pythons
        and defect_applies(d, r, None) for p in d.pythons
    )
    py, pick = _pick_python(r, m, avoid)
    findings.append(py)
    findings += _check_host(r, m)
    if gpu_mode:
        findings += _check_defects(r, policy, pick.python)
    return findings, pick


def summary(fails: Iterable[Finding]) -> str:
    """The failures in a few words; GPUs that fail the same way share one entry ("GPU 0, 1 cc 3.7: ...")."""
    shorts: list[str] = []
    gpus: dict[str, list[str]] = {}  # "cc 3.7: no kernels" -> ["0", "1"]
    for f in fails:
        m = re.fullmatch(r"GPU (\d+) (.*)", f.short)
        if f.gpu_index is not None and m:
            if m.group(2) not in gpus:
                gpus[m.group(2)] = []
                shorts.append(f"\0{m.group(2)}")  # placeholder, filled in below
            gpus[m.group(2)].append(m.group(1))
        elif f.short and f.short not in shorts:
            shorts.append(f.short)
    return "; ".join(f"GPU {', '.join(gpus[x[1:]])} {x[1:]}" if x.startswith("\0") else x for x in shorts)


def failures(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if not f.ok]
