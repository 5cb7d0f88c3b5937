"""Knowledge: the sourced compatibility data in profiles/*.yaml, (the model: plain, frozen dataclasses
and pure look-ups).

Schema (each file documents itself in a header comment too):

matrix.yaml   releases:    one row per TensorFlow release (Linux x86_64) -> Release
drivers.yaml  cuda:        CUDA version -> minimum Linux driver (toolkit table)  -> DriverRow
              minor_compat: CUDA major -> minimum driver for minor-version compatibility -> MinorCompatRow
              architectures: compute capabilities -> last driver branch -> ArchRow
              ptxas: ptxas (CUDA) version -> highest compute capability it targets -> PtxasRow
gpus.yaml     groups:      compute capability + source -> GPU model names (and nvidia-smi spellings) -> GpuRow
kernels.yaml  floors:      library release -> lowest compute capability it has kernels for -> FloorRow
              known_failures: TensorFlow release range x compute capabilities that fail -> KnownFailure
errors.yaml   rules:       log pattern -> cause -> fix -> source (used by doctor)
stable.yaml / latest.yaml / legacy.yaml / preview.yaml: policies -> Policy

Every row carries `source`. A value that could not be confirmed is listed in the
row's `unconfirmed` list; the resolver says so when it relies on one.
Loading errors raise BadInputError naming file:line (knowledge/yaml_reader.py keeps
line numbers; knowledge/schema.py validates; knowledge/load.py reads and caches;
knowledge/gpu_names.py matches GPU names). scripts/gather_knowledge.py re-derives matrix.yaml from the wheels on PyPI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tfgpu_install.errors import BadInputError


@dataclass(frozen=True)
class Defect:
    id: str
    text: str
    source: str
    blocks: bool = False  # True: never choose this release for a GPU install
    fix: Optional[str] = None  # what the installer does about it (e.g. "activation sets LD_LIBRARY_PATH")
    pythons: tuple[str, ...] = ()  # only on these Pythons ("3.11"); empty: on all
    path: Optional[str] = None  # only on this install path: "pip" (the and-cuda extra) or "system"


@dataclass(frozen=True)
class Release:
    tensorflow: str  # "2.15.1"
    package: str  # "tensorflow" or "tensorflow-gpu"
    released: Optional[str]  # ISO date of the PyPI upload
    pythons: tuple[str, ...]  # ("3.9", "3.10", "3.11")
    cuda: Optional[str]  # build CUDA "12.2"; None for a CPU-only line
    cudnn: Optional[str]  # build cuDNN "8.9" (major.minor or as published)
    sass: tuple[str, ...]  # compute capabilities with SASS, e.g. ("5.0","6.0","7.0","8.0","8.9")
    ptx: tuple[str, ...]  # compute capabilities with PTX, e.g. ("9.0",)
    min_glibc: str  # from the wheel's manylinux tag: "2.17"
    manylinux: str  # "manylinux2014_x86_64" / "manylinux_2_27_x86_64"
    cuda_from: str  # "pip" (nvidia-* wheels via extra) | "system" (toolkit + cuDNN by hand/conda)
    extra: Optional[str]  # "and-cuda" where the extra exists
    pins: dict[str, str]  # exact tested wheel pins: {"nvidia-cudnn-cu12": "8.9.4.25", ...}
    constraints: dict[str, str]  # {"numpy": ">=1.23.5,<2.0", "protobuf": ">=3.20.3,<5"}
    defects: tuple[Defect, ...]
    sources: dict[str, str]  # field -> where it came from ("wheel:build_info.py", "tf-tested-table: URL")
    unconfirmed: tuple[str, ...] = ()  # field names not confirmed from a source
    arches: tuple[str, ...] = ("x86_64",)
    notes: Optional[str] = None
    line: int = 0  # line in matrix.yaml (for messages)
    source: str = ""  # the row's main source (the wheel it was read from)
    # "exact": the and-cuda extra pins `==` (pins = those); "tested": the extra floats (ranges, 2.20+),
    # pins = the versions the build was made/tested with; "none": no extra (system CUDA).
    pins_kind: str = "none"
    extra_requires: dict[str, str] = field(default_factory=dict)  # the extra's own specifiers, verbatim
    build_info: dict[str, str] = field(default_factory=dict)  # raw build_info.py values (cuda_version...)
    # pinned wheel -> "sha256:..." of its Linux x86_64 file (from pip's own report)
    pin_hashes: dict[str, str] = field(default_factory=dict)
    # the sonames TF's dso loader dlopens for CUDA/cuDNN ("libcusolver.so.10"): what any source must provide
    sonames: tuple[str, ...] = ()
    # read from the package index by `knowledge update` (knowledge/learned.py), not curated in matrix.yaml
    learned: bool = False
    # learned releases: the day this tool first read it from the index (its age for a profile counts from
    # the later of this and `released`: an index's date alone never makes a release old)
    first_seen: Optional[str] = None

    @property
    def prerelease(self) -> bool:
        """2.22.0rc0: a release candidate (or alpha/beta), learned only with `knowledge update --pre`."""
        return is_prerelease(self.tensorflow)

    @property
    def blocking_defects(self) -> tuple[Defect, ...]:
        return tuple(d for d in self.defects if d.blocks)


@dataclass(frozen=True)
class DriverRow:
    cuda: str  # "12.2"
    min_driver: str  # "535.54.03"
    source: str
    label: str = ""  # the toolkit table's own wording, e.g. "CUDA 12.2 GA"
    line: int = 0


@dataclass(frozen=True)
class MinorCompatRow:
    cuda_major: str  # "12"
    min_driver: str  # "525.60.13": any 12.x runs on this driver (no newer PTX JIT)
    source: str
    caveat: str = ""


@dataclass(frozen=True)
class ArchRow:
    """A GPU architecture's compute capabilities and the last driver branch that supports it."""

    architecture: str  # "Kepler"
    cc_min: str  # "3.0"
    cc_max: str  # "3.7"
    last_branch: int  # 470: drivers R470.x are the last with this architecture
    source: str
    line: int = 0


@dataclass(frozen=True)
class PtxasRow:
    """The newest compute capability a ptxas (from the CUDA release of that version) can target."""

    ptxas: str  # "12.8" (the nvidia-cuda-nvcc-cu12 wheel's CUDA version)
    highest_cc: str  # "12.0" (sm_120)
    source: str
    line: int = 0
    adds: tuple[str, ...] = ()  # compute capabilities this ptxas is the first to target
    wheel: str = ""  # "nvidia-cuda-nvcc-cu12==12.8.93": the nvcc wheel carrying this ptxas
    sha256: str = ""  # "sha256:..." of that wheel (Linux x86_64)


@dataclass(frozen=True)
class FloorRow:
    """From library release `since` on, GPUs below `min_cc` have no kernels in it (kernels.yaml floors)."""

    library: str  # "cudnn" | "cuda"
    since: str  # "9.11": the first release without them
    min_cc: str  # "7.5"
    source: str
    last: str = ""  # "9.10.2.21": the newest release that still has them
    wheel: str = ""  # "nvidia-cudnn-cu12==9.10.2.21": what the plan pins for such a GPU
    sha256: str = ""  # "sha256:..." of that wheel (Linux x86_64)
    line: int = 0


@dataclass(frozen=True)
class KnownFailure:
    """TensorFlow releases in `tensorflow` fail on compute capabilities cc_min..cc_max (kernels.yaml)."""

    id: str  # "blackwell-ptx-jit"
    tensorflow: str  # a PEP 440 specifier, pre-releases included: "<2.22"
    cc_min: str
    cc_max: str
    text: str
    sources: tuple[str, ...]
    runs_instead: tuple[str, ...] = ()
    unless_sass: bool = True  # a release with SASS for the GPU is not affected
    inferred: bool = False  # no public report of this exact case: the same cause as the reported one
    line: int = 0


@dataclass(frozen=True)
class GpuRow:
    name: str  # canonical model name as nvidia-smi prints it, e.g. "NVIDIA GeForce RTX 3090"
    compute_capability: str  # "8.6"
    source: str
    aliases: tuple[str, ...] = ()
    architecture: Optional[str] = None  # "Ampere"


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    prefer: str  # "newest" | "oldest": order of candidates after filtering
    require_patch_release: bool = False  # stable: x.y.z with z >= 1 or a later x.y existing
    min_age_days: int = 0  # stable: months behind it
    tensorflow: Optional[str] = None  # a specifier, e.g. ">=2.12,<2.18"
    allow_defects: bool = False
    source: str = ""
    # how the CUDA libraries may come: "pip" (nvidia-* wheels, 2.14+) and/or "system" (toolkit/conda)
    cuda_from: tuple[str, ...] = ("pip", "system")
    jit_only_ok: bool = True  # accept a GPU that only PTX (JIT) covers, flagged jit_only
    # releases learned from the index (not curated): "any" | "settled" (a patch release, and min_age_days
    # old when the profile has an age rule) | "never"
    learned: str = "settled"
    path: Optional[str] = None  # the file it was loaded from
    prereleases: bool = False  # may pick a pre-release (2.22.0rc0) learned with `knowledge update --pre`
    explicit: bool = False  # the user named the release (--tensorflow): a known failure warns, never rejects


@dataclass(frozen=True)
class Knowledge:
    releases: tuple[Release, ...]  # newest first
    drivers: tuple[DriverRow, ...]
    minor_compat: tuple[MinorCompatRow, ...]
    gpus: tuple[GpuRow, ...]
    policies: dict[str, Policy] = field(default_factory=dict)
    directory: Optional[Path] = None
    architectures: tuple[ArchRow, ...] = ()  # drivers.yaml architectures: driver ceilings per architecture
    ptxas: tuple[PtxasRow, ...] = ()  # drivers.yaml ptxas: ptxas version -> highest compute capability
    floors: tuple[FloorRow, ...] = ()  # kernels.yaml floors: library release -> lowest compute capability
    known_failures: tuple[KnownFailure, ...] = ()  # kernels.yaml known_failures

    def release(self, version: str) -> Optional[Release]:
        return next((r for r in self.releases if r.tensorflow == version), None)



BUILTIN_POLICIES = ("stable", "latest", "legacy", "preview")


def _driver_key(version: str) -> tuple[int, ...]:
    parts = []
    for p in version.strip().split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        raise BadInputError(
            f"not a driver version: {version!r}", hint='give it like "535.104.05"'
        )
    return tuple(parts)


def max_cuda_for_driver(knowledge: Knowledge, driver_version: str) -> Optional[DriverRow]:
    """The newest CUDA whose minimum driver is <= driver_version (toolkit table)."""
    have = _driver_key(driver_version)
    fits = [r for r in knowledge.drivers if _driver_key(r.min_driver) <= have]
    if not fits:
        return None
    return max(fits, key=lambda r: (release_key(r.cuda), _driver_key(r.min_driver)))


def minor_compat_for_driver(knowledge: Knowledge, driver_version: str) -> Optional[MinorCompatRow]:
    """The CUDA major this driver runs any minor of through minor-version compatibility, if any."""
    have = _driver_key(driver_version)
    fits = [r for r in knowledge.minor_compat if _driver_key(r.min_driver) <= have]
    if not fits:
        return None
    return max(fits, key=lambda r: int(r.cuda_major))


# --- versions: the one home for reading version strings -----------------------------------


def version_key(version: str) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); '9.0a' -> (9, 0); tolerant of junk (stops at it)."""
    parts: list[int] = []
    for piece in str(version).strip().split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):
            break
    return tuple(parts)


_RELEASE = re.compile(r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?$")
_STAGE = {"a": -3, "b": -2, "rc": -1}


def release_key(version: str) -> tuple[int, ...]:
    """A release's place in order (PEP 440 for the forms releases use): 2.22.0rc0 < 2.22.0 < 2.22.0.post1.
    "2.15.0.post1" -> (2, 15, 0, 0, 0, 1); "2.22.0rc1" -> (2, 22, 0, -1, 1, 0). ValueError on anything else."""
    m = _RELEASE.match(version.strip())
    if not m:
        raise ValueError(f"not a release version: {version!r}")
    nums = tuple(int(x) for x in m.group(1).split("."))
    nums += (0,) * (3 - len(nums))
    stage = (_STAGE[m.group(2)], int(m.group(3))) if m.group(2) else (0, 0)
    return nums + stage + (int(m.group(4) or 0),)


def is_prerelease(version: str) -> bool:
    m = _RELEASE.match(version.strip())
    return bool(m and m.group(2))


def numbers_in(text: str) -> tuple[int, ...]:
    """Every run of digits, in order: "cuda-12.2" -> (12, 2), "9.3.0.75" -> (9, 3, 0, 75)."""
    return tuple(int(x) for x in re.findall(r"\d+", text))
