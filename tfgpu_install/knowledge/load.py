"""Reading the knowledge files: validate profiles/*.yaml into the model, cached on disk by content."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError
from tfgpu_install.knowledge.model import BUILTIN_POLICIES, FloorRow, Knowledge, KnownFailure, Policy
from tfgpu_install.knowledge.schema import (
    parse_drivers,
    parse_gpus,
    parse_hardware,
    parse_kernels,
    parse_matrix,
    parse_policy,
)


def profiles_dir() -> Path:
    """The packaged profiles/ directory (the `tfgpu_install.profiles` package maps to it)."""
    try:
        import tfgpu_install.profiles  # type: ignore[import-not-found, unused-ignore]
    except ImportError:  # run from a source tree that was not installed (scripts/)
        return Path(__file__).resolve().parents[2] / "profiles"
    return Path(tfgpu_install.profiles.__file__).resolve().parent


def load_knowledge(directory: Optional[Path] = None, cache_dir: Optional[Path] = None) -> Knowledge:
    """Load and validate matrix.yaml, drivers.yaml, gpus.yaml and the policy files.

    Raises BadInputError("<file>:<line>: <what is wrong>") on malformed data.
    Cached per directory for the life of the process (the files are read-only data).
    With `cache_dir` (pass ctx.cache_dir), the validated result is also kept on disk, keyed by
    the files' content: parsing ~3000 lines of YAML costs ~100 ms, reading the cache ~2 ms,
    and `probe`/`plan` must start fast.
    """
    return _load_cached(Path(directory or profiles_dir()).resolve(), cache_dir)


KNOWLEDGE_FILES = ("matrix.yaml", "drivers.yaml", "gpus.yaml", "kernels.yaml") + tuple(
    f"{n}.yaml" for n in BUILTIN_POLICIES)
# Added after sites began keeping their own profiles dir (TFGPU_PROFILES_DIR): where that dir lacks one,
# the packaged file is read (NVIDIA's floors, the known failures, the preview policy).
PACKAGED_FALLBACK = ("kernels.yaml", "preview.yaml")


def _source(directory: Path, name: str) -> tuple[Path, str]:
    """The file to read for `name` and its label in messages ("profiles/matrix.yaml" for the built-in
    files, the full path otherwise)."""
    own = directory / name
    if name in PACKAGED_FALLBACK and directory != profiles_dir() and not own.is_file():
        return profiles_dir() / name, f"profiles/{name}"
    return own, f"profiles/{name}" if directory == profiles_dir() else str(own)


def load_kernels(directory: Optional[Path] = None) -> tuple[tuple[FloorRow, ...], tuple[KnownFailure, ...]]:
    """kernels.yaml alone (a site's, else the packaged one): for readers that need only the architecture rows
    (the doctor), so a site dir holding just its own errors.yaml still works."""
    return parse_kernels(*_source(Path(directory) if directory is not None else profiles_dir(), "kernels.yaml"))


@lru_cache(maxsize=8)
def _load_cached(directory: Path, cache_dir: Optional[Path]) -> Knowledge:
    if cache_dir is None:
        return _parse_all(directory)
    import zlib  # not hashlib: importing OpenSSL costs more than the whole cached load

    from tfgpu_install.knowledge import cache

    # Keyed by the files' content; the file itself says which format and field shape it holds.
    crc, size = zlib.crc32(f"{cache.FORMAT}:{cache.SHAPE}".encode()), 0
    for name in KNOWLEDGE_FILES:
        try:
            data = _source(directory, name)[0].read_bytes()
        except OSError:
            return _parse_all(directory)  # let the parser report the missing file
        crc, size = zlib.crc32(name.encode() + b"\0" + data, crc), size + len(data)
    path = Path(cache_dir) / "knowledge" / f"{crc:08x}-{size}.json"
    kn = cache.read(path, directory, Path(cache_dir))
    if kn is None:  # none yet, or any doubt about it: parse the YAML and write it again
        kn = _parse_all(directory)
        cache.write(path, kn)
    return kn


def _parse_all(directory: Path) -> Knowledge:
    def src(name: str) -> tuple[Path, str]:
        return _source(directory, name)

    releases = parse_matrix(*src("matrix.yaml"))
    drivers, minor = parse_drivers(*src("drivers.yaml"))
    gpus = parse_gpus(*src("gpus.yaml"))
    policies = {name: parse_policy(*src(f"{name}.yaml"), expect_name=name) for name in BUILTIN_POLICIES}
    archs, ptxas = parse_hardware(*src("drivers.yaml"))
    floors, failures = parse_kernels(*src("kernels.yaml"))
    return Knowledge(releases, drivers, minor, gpus, policies, directory, architectures=archs, ptxas=ptxas,
                     floors=floors, known_failures=failures)


def load_policy(name_or_path: str, knowledge: Knowledge) -> Policy:
    """A built-in policy by name (stable/latest/legacy/preview) or a user's YAML file.
    Unknown name -> UsageError (exit 2: a typo on the command line) naming the closest and the known ones."""
    if name_or_path in knowledge.policies:
        return knowledge.policies[name_or_path]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or "/" in name_or_path or path.exists():
        if not path.is_file():
            raise BadInputError(
                f"profile file {name_or_path} does not exist",
                hint="give a built-in profile (" + ", ".join(sorted(knowledge.policies))
                + f") or the path of a policy YAML file (the format: {policy_example(knowledge)})",
            )
        return parse_policy(path, str(name_or_path))
    import difflib

    from tfgpu_install.errors import UsageError
    from tfgpu_install.guard.names import printable

    close = difflib.get_close_matches(name_or_path, sorted(knowledge.policies), n=1)
    raise UsageError(
        f"unknown profile {printable(name_or_path[:80])!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
        hint="known profiles: " + ", ".join(sorted(knowledge.policies))
        + "; or pass the path of your own policy YAML file",
    )


def policy_example(knowledge: Knowledge) -> str:
    """Where a user can read a policy file's format: the built-in stable policy's own file, wherever the
    tool is installed (a wheel has no profiles/ directory of its own)."""
    stable = knowledge.policies.get("stable")
    return stable.path if stable is not None and stable.path else str(profiles_dir() / "stable.yaml")


def knowledge_dir(ctx: Context) -> Optional[Path]:
    """TFGPU_PROFILES_DIR points the tool at another profiles/ directory (tests, a site's own data)."""
    return ctx.profiles_dir
