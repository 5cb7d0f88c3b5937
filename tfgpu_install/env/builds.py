"""What a distribution's files must be: one digest over its RECORD, the build's fingerprint.

Two builds of the same name and version (another wheel, other code, each with its own consistent
RECORD) differ in the files their RECORDs list or in those files' sha256. The snapshot keeps, for
each package, the sha256 over the sorted "path<TAB>hash" rows of the files the wheel itself
delivers (its `content`, "sha256:<hex>"); `check`, restore and the install's repair compare the
installed RECORD with it before they compare any file with that RECORD. So the installed RECORD
is believed only once it is the one recorded at known-good time: a same-version swap rewrites the
RECORD and is seen (`rpm -V` compares with the package database, which an install of other bytes
does not rewrite; our database is the snapshot).

Left out of the digest, because the installer writes them, not the wheel, and they differ between
uv and pip or between two env paths for the very same wheel: bytecode (`*.pyc`, `__pycache__/`),
launchers in the env's bin/ (their `#!` line names the env's Python), and the dist-info's
INSTALLER, REQUESTED, RECORD, direct_url.json and uv's uv_cache.json / uv_build.json. Those are
still compared with the RECORD itself.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Optional, Sequence

# dist-info files written by the installer, not taken from the wheel (uv_cache.json: uv's note of
# where the wheel came from, with times; uv_build.json: uv's build info)
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "RECORD", "direct_url.json", "uv_cache.json",
                              "uv_build.json"})


def _from_wheel(path: str) -> bool:
    """Whether a RECORD row (site-packages-relative) names a file the wheel delivers as it is."""
    if not path or path.endswith(".pyc") or "__pycache__/" in path:
        return False
    head, _, name = path.rpartition("/")
    if name in _INSTALLER_FILES and head.endswith(".dist-info") and "/" not in head:
        return False
    rest = path
    while rest.startswith("../"):
        rest = rest[3:]
    return not (rest != path and rest.startswith("bin/"))  # a launcher: its #! names this env's Python


def content_digest(rows: Iterable[Sequence[str]]) -> Optional[str]:
    """"sha256:<hex>" over the rows (RECORD's path, hash) of the files the wheel delivers; None when
    there are none (nothing to fingerprint)."""
    items = sorted(f"{row[0]}\t{row[1] if len(row) > 1 else ''}" for row in rows if row and _from_wheel(row[0]))
    if not items:
        return None
    return "sha256:" + hashlib.sha256("\n".join(items).encode("utf-8", "surrogateescape")).hexdigest()


__all__ = ["content_digest"]
