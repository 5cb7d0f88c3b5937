"""Knowledge: the sourced compatibility data in profiles/*.yaml, validated on load.

Schema (each file documents itself in a header comment too):

matrix.yaml   releases:    one row per TensorFlow release (Linux x86_64) -> Release
drivers.yaml  cuda:        CUDA version -> minimum Linux driver (toolkit table)  -> DriverRow
              minor_compat: CUDA major -> minimum driver for minor-version compatibility -> MinorCompatRow
gpus.yaml     gpus:        GPU model name -> compute capability -> GpuRow
errors.yaml   rules:       log pattern -> cause -> fix -> source (used by doctor)
stable.yaml / latest.yaml / legacy.yaml: policies -> Policy

Every row carries `source`. A value that could not be confirmed is listed in the
row's `unconfirmed` list; the resolver says so when it relies on one.
Loading errors raise BadInputError naming file:line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class Defect:
    id: str
    text: str
    source: str
    blocks: bool = False  # True: never choose this release for a GPU install
    fix: Optional[str] = None  # what the installer does about it (e.g. "activation sets LD_LIBRARY_PATH")


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

    @property
    def blocking_defects(self) -> tuple[Defect, ...]:
        return tuple(d for d in self.defects if d.blocks)


@dataclass(frozen=True)
class DriverRow:
    cuda: str  # "12.2"
    min_driver: str  # "535.54.03"
    source: str


@dataclass(frozen=True)
class MinorCompatRow:
    cuda_major: str  # "12"
    min_driver: str  # "525.60.13": any 12.x runs on this driver (no newer PTX JIT)
    source: str
    caveat: str = ""


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


@dataclass(frozen=True)
class Knowledge:
    releases: tuple[Release, ...]  # newest first
    drivers: tuple[DriverRow, ...]
    minor_compat: tuple[MinorCompatRow, ...]
    gpus: tuple[GpuRow, ...]
    policies: dict[str, Policy] = field(default_factory=dict)


# --- API (implemented by the knowledge work; signatures are a contract other modules use) ---


def profiles_dir() -> Path:
    """The packaged profiles/ directory (the `installer.profiles` package maps to it)."""
    import installer.profiles

    return Path(installer.profiles.__file__).resolve().parent


def load_knowledge(directory: Optional[Path] = None) -> Knowledge:
    """Load and validate matrix.yaml, drivers.yaml, gpus.yaml and the policy files.

    Raises BadInputError("<file>:<line>: <what is wrong>") on malformed data.
    """
    raise NotImplementedError


def load_policy(name_or_path: str, knowledge: Knowledge) -> Policy:
    """A built-in policy by name (stable/latest/legacy) or a user's YAML file.
    Unknown name -> BadInputError listing the known ones."""
    raise NotImplementedError


def gpu_by_name(knowledge: Knowledge, name: str) -> Optional[GpuRow]:
    """Match an nvidia-smi GPU name ("Tesla K80", "NVIDIA GeForce RTX 3090",
    "GeForce GTX 1080 Ti", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB") to a row."""
    raise NotImplementedError


def max_cuda_for_driver(knowledge: Knowledge, driver_version: str) -> Optional[DriverRow]:
    """The newest CUDA whose minimum driver is <= driver_version (toolkit table)."""
    raise NotImplementedError


def minor_compat_for_driver(knowledge: Knowledge, driver_version: str) -> Optional[MinorCompatRow]:
    """The CUDA major this driver runs any minor of through minor-version compatibility, if any."""
    raise NotImplementedError
