"""Knowledge: the sourced compatibility data in profiles/*.yaml, validated on load.

Schema (each file documents itself in a header comment too):

matrix.yaml   releases:    one row per TensorFlow release (Linux x86_64) -> Release
drivers.yaml  cuda:        CUDA version -> minimum Linux driver (toolkit table)  -> DriverRow
              minor_compat: CUDA major -> minimum driver for minor-version compatibility -> MinorCompatRow
gpus.yaml     groups:      compute capability + source -> GPU model names (and nvidia-smi spellings) -> GpuRow
errors.yaml   rules:       log pattern -> cause -> fix -> source (used by doctor)
stable.yaml / latest.yaml / legacy.yaml: policies -> Policy

Every row carries `source`. A value that could not be confirmed is listed in the
row's `unconfirmed` list; the resolver says so when it relies on one.
Loading errors raise BadInputError naming file:line (installer/knowledge_yaml.py keeps
line numbers; installer/knowledge_schema.py validates; installer/knowledge_gpu.py matches
GPU names). scripts/gather_knowledge.py re-derives matrix.yaml from the wheels on PyPI.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Optional

from .errors import BadInputError


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
    path: Optional[str] = None  # the file it was loaded from


@dataclass(frozen=True)
class Knowledge:
    releases: tuple[Release, ...]  # newest first
    drivers: tuple[DriverRow, ...]
    minor_compat: tuple[MinorCompatRow, ...]
    gpus: tuple[GpuRow, ...]
    policies: dict[str, Policy] = field(default_factory=dict)
    directory: Optional[Path] = None

    def release(self, version: str) -> Optional[Release]:
        return next((r for r in self.releases if r.tensorflow == version), None)



# --- API (implemented by the knowledge work; signatures are a contract other modules use) ---

BUILTIN_POLICIES = ("stable", "latest", "legacy")


def profiles_dir() -> Path:
    """The packaged profiles/ directory (the `installer.profiles` package maps to it)."""
    try:
        import installer.profiles  # type: ignore[import-not-found, unused-ignore]
    except ImportError:  # run from a source tree that was not installed (scripts/)
        return Path(__file__).resolve().parent.parent / "profiles"
    return Path(installer.profiles.__file__).resolve().parent


def load_knowledge(directory: Optional[Path] = None, cache_dir: Optional[Path] = None) -> Knowledge:
    """Load and validate matrix.yaml, drivers.yaml, gpus.yaml and the policy files.

    Raises BadInputError("<file>:<line>: <what is wrong>") on malformed data.
    Cached per directory for the life of the process (the files are read-only data).
    With `cache_dir` (pass ctx.cache_dir), the validated result is also kept on disk, keyed by
    the files' content: parsing ~3000 lines of YAML costs ~100 ms, reading the cache ~2 ms,
    and `probe`/`plan` must start fast.
    """
    return _load_cached(Path(directory or profiles_dir()).resolve(), cache_dir)


KNOWLEDGE_FILES = ("matrix.yaml", "drivers.yaml", "gpus.yaml") + tuple(f"{n}.yaml" for n in BUILTIN_POLICIES)
_CACHE_FORMAT = "knowledge-v1"
_PICKLED = (Knowledge, Release, Defect, DriverRow, MinorCompatRow, GpuRow, Policy)


@lru_cache(maxsize=8)
def _load_cached(directory: Path, cache_dir: Optional[Path]) -> Knowledge:
    if cache_dir is None:
        return _parse_all(directory)
    import pickle
    import zlib  # not hashlib: importing OpenSSL costs more than the whole cached load

    # The key covers the dataclasses' fields too: a pickle of an older shape must not load.
    shape = ",".join(f.name for cls in _PICKLED for f in fields(cls))
    crc, size = zlib.crc32(f"{_CACHE_FORMAT}:{shape}".encode()), 0
    for name in KNOWLEDGE_FILES:
        try:
            data = (directory / name).read_bytes()
        except OSError:
            return _parse_all(directory)  # let the parser report the missing file
        crc, size = zlib.crc32(name.encode() + b"\0" + data, crc), size + len(data)
    cache = Path(cache_dir) / "knowledge" / f"{crc:08x}-{size}.pickle"
    try:
        with open(cache, "rb") as fh:
            kn = pickle.load(fh)  # our own file, written below from validated data
        if isinstance(kn, Knowledge) and kn.directory == directory:
            return kn
    except (OSError, EOFError, pickle.PickleError, AttributeError, TypeError, ValueError):
        pass
    kn = _parse_all(directory)
    try:
        import os
        import tempfile

        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(kn, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, cache)  # readers see the old file or the whole new one
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full cache dir only costs speed
    return kn


def _parse_all(directory: Path) -> Knowledge:
    from .knowledge_schema import parse_drivers, parse_gpus, parse_matrix, parse_policy

    def label(name: str) -> str:
        # "profiles/matrix.yaml" for the built-in files, the full path otherwise
        return f"profiles/{name}" if directory == profiles_dir() else str(directory / name)

    releases = parse_matrix(directory / "matrix.yaml", label("matrix.yaml"))
    drivers, minor = parse_drivers(directory / "drivers.yaml", label("drivers.yaml"))
    gpus = parse_gpus(directory / "gpus.yaml", label("gpus.yaml"))
    policies = {
        name: parse_policy(directory / f"{name}.yaml", label(f"{name}.yaml"), expect_name=name)
        for name in BUILTIN_POLICIES
    }
    return Knowledge(releases, drivers, minor, gpus, policies, directory)


def load_policy(name_or_path: str, knowledge: Knowledge) -> Policy:
    """A built-in policy by name (stable/latest/legacy) or a user's YAML file.
    Unknown name -> BadInputError listing the known ones."""
    if name_or_path in knowledge.policies:
        return knowledge.policies[name_or_path]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or "/" in name_or_path or path.exists():
        if not path.is_file():
            raise BadInputError(
                f"profile file {name_or_path} does not exist",
                hint="give a built-in profile (" + ", ".join(sorted(knowledge.policies))
                + ") or the path of a policy YAML file (see profiles/stable.yaml for the format)",
            )
        from .knowledge_schema import parse_policy

        return parse_policy(path, str(name_or_path))
    raise BadInputError(
        f"unknown profile {name_or_path!r}",
        hint="known profiles: " + ", ".join(sorted(knowledge.policies))
        + "; or pass the path of your own policy YAML file",
    )


def gpu_by_name(knowledge: Knowledge, name: str) -> Optional[GpuRow]:
    """Match an nvidia-smi GPU name ("Tesla K80", "NVIDIA GeForce RTX 3090",
    "GeForce GTX 1080 Ti", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB") to a row."""
    from .knowledge_gpu import match_gpu

    return match_gpu(knowledge.gpus, name)


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
    return max(fits, key=lambda r: (_version_key(r.cuda), _driver_key(r.min_driver)))


def minor_compat_for_driver(knowledge: Knowledge, driver_version: str) -> Optional[MinorCompatRow]:
    """The CUDA major this driver runs any minor of through minor-version compatibility, if any."""
    have = _driver_key(driver_version)
    fits = [r for r in knowledge.minor_compat if _driver_key(r.min_driver) <= have]
    if not fits:
        return None
    return max(fits, key=lambda r: int(r.cuda_major))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.replace(".post", ".").split("."))
