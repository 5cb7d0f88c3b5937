"""Hostile conda packages: every package is unpacked into a scratch dir and checked before
rattler links anything into the env. rattler links each path info/paths.json names from its
cache into the prefix, so a `../` there writes outside the env (tried: it does); a symlink
whose target leaves the prefix points the env at the rest of the machine.

Refused: a paths.json (or old info/files) entry that is absolute or climbs with `..`; a
symlink in the package whose target resolves outside the package root; an archive whose
sha256 is not the one the channel's repodata gives.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.errors import BadInputError


def _refuse(package: str, what: str) -> BadInputError:
    return BadInputError(
        f"conda package {package} is unsafe: {what}; nothing was installed from it",
        "the channel serves a package that would write outside the env; use a trusted --conda-channel",
        ref="conda-unsafe-package",
    )


def _climbs(path: str) -> bool:
    return path.startswith("/") or ".." in Path(path).parts


def listed_paths(root: Path) -> list[str]:
    """The paths the package says it installs (info/paths.json, or info/files in old packages)."""
    try:
        doc: Any = json.loads((root / "info" / "paths.json").read_text())
        return [str(e.get("_path", "")) for e in doc.get("paths", []) if isinstance(e, dict)]
    except (OSError, ValueError, AttributeError):
        pass
    try:
        return [ln for ln in (root / "info" / "files").read_text().splitlines() if ln.strip()]
    except OSError:
        return []


def escaping_links(root: Path) -> list[str]:
    """Symlinks under root whose target, resolved lexically from the link's directory, leaves root."""
    out = []
    base = os.path.normpath(str(root))
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                continue
            target = os.readlink(p)
            resolved = os.path.normpath(os.path.join(dirpath, target))
            if os.path.isabs(target) or not (resolved == base or resolved.startswith(base + os.sep)):
                out.append(f"{os.path.relpath(p, root)} -> {target}")
    return out


def vet_archive(archive: Path, package: str, sha256: Optional[str], scratch_parent: Path) -> None:
    """Unpack `archive` into a scratch dir, check it, remove the scratch dir. Raises BadInputError."""
    import rattler.package_streaming as streaming

    scratch_parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".tfgpu-vet-", dir=str(scratch_parent)))
    try:
        try:
            got_sha, _ = streaming.extract(archive, scratch)
        except Exception as exc:
            raise _refuse(package, f"the archive cannot be read ({type(exc).__name__}: {exc})") from exc
        if sha256 and got_sha.hex() != sha256.lower():
            raise BadInputError(
                f"conda package {package}: sha256 {got_sha.hex()} is not the channel's {sha256}",
                "the channel or mirror serves other bytes than its repodata says; use a trusted --conda-channel",
                ref="hash-mismatch",
            )
        bad = [p for p in listed_paths(scratch) if _climbs(p)]
        if bad:
            raise _refuse(package, f"it installs {', '.join(bad[:3])} (outside the env)")
        links = escaping_links(scratch)
        if links:
            raise _refuse(package, f"its symlinks leave the env: {', '.join(links[:3])}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
