"""Which GPUs a library release or a TensorFlow release has working kernels for, by the rows of
profiles/kernels.yaml (pure look-ups).

One fact, one row, read by all who need it: the resolver (plan, install), the doctor (a log's
"no kernel image" or INVALID_PTX on such a GPU) and the GPU check (what it names when a layer fails).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Optional

from tfgpu_install.knowledge.model import FloorRow, KnownFailure, version_key


def below(cc: str, floor: str) -> bool:
    return version_key(cc) < version_key(floor)


def floor_for(floors: Iterable[FloorRow], library: str, version: Optional[str]) -> Optional[FloorRow]:
    """The floor in force for `library` at `version` (the newest row whose `since` <= version), or None."""
    if not version or not version_key(version):
        return None
    rows = [r for r in floors if r.library == library and version_key(r.since) <= version_key(version)]
    return max(rows, key=lambda r: version_key(r.since)) if rows else None


def lacks_kernels(floors: Iterable[FloorRow], library: str, version: Optional[str], cc: str) -> Optional[FloorRow]:
    """The floor row when `library` `version` has no kernels for compute capability `cc`; None when it
    has them, or when nothing is known of it."""
    row = floor_for(floors, library, version)
    return row if row is not None and below(cc, row.min_cc) else None


def last_with_kernels(floors: Iterable[FloorRow], library: str, cc: str) -> Optional[FloorRow]:
    """The oldest floor that leaves `cc` out: its `last` is the newest release that still runs `cc`."""
    rows = [r for r in floors if r.library == library and below(cc, r.min_cc)]
    return min(rows, key=lambda r: version_key(r.since)) if rows else None


@lru_cache(maxsize=64)
def _spec(spec: str) -> object:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(spec)


def in_range(spec: str, tensorflow: str) -> bool:
    """`tensorflow` inside a row's specifier, pre-releases included ("<2.22" holds 2.21.1, not 2.22.0rc0)."""
    from packaging.specifiers import SpecifierSet

    s = _spec(spec)
    assert isinstance(s, SpecifierSet)
    return s.contains(tensorflow, prereleases=True)


def known_failure(failures: Iterable[KnownFailure], tensorflow: str, cc: str,
                  has_sass: bool) -> Optional[KnownFailure]:
    """The known failure of TensorFlow `tensorflow` on compute capability `cc`, or None. `has_sass`: the
    release's own SASS list covers the GPU (a row with unless_sass does not hold then)."""
    key = version_key(cc)
    for row in failures:
        if not version_key(row.cc_min) <= key <= version_key(row.cc_max):
            continue
        if row.unless_sass and has_sass:
            continue
        if in_range(row.tensorflow, tensorflow):
            return row
    return None


def failure_text(row: KnownFailure) -> str:
    """The failure in words, with its sources and whether it is inferred."""
    how = "inferred, same cause" if row.inferred else "reported"
    return f"known failure {row.id} ({how}): {row.text} ({', '.join(row.sources)})"


def floor_text(row: FloorRow) -> str:
    """The floor in words with its first source (the row in kernels.yaml has them all)."""
    import re

    what = {"cudnn": "cuDNN", "cuda": "CUDA"}.get(row.library, row.library)
    last = f"; {row.last} is the last with them" if row.last else ""
    url = re.search(r"https?://[^\s,;)]+", row.source)
    return (f"{what} >= {row.since} has no kernels for compute capability < {row.min_cc}{last} "
            f"({url.group(0) if url else row.source}; profiles/kernels.yaml:{row.line})")
