"""Where an installed distribution came from, by its own record: PEP 610's direct_url.json, which
pip and uv write when a distribution was installed from a file, a directory, a VCS or a URL, and
never for one resolved from an index. `upgrade` carries by name only what came from an index:
installed by name in the new env, a package that came from a local wheel (`mycorp-private==1.0`)
would be taken from the index, where anyone can publish that name (dependency confusion)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.env.layout import canonical_name, site_packages_dirs
from tfgpu_install.guard.jsondoc import flag, obj

MAX_BYTES = 64 * 1024  # a direct_url.json is a few hundred bytes


@dataclass(frozen=True)
class DirectOrigin:
    url: str  # as recorded (file:///..., https://..., git+https://...)
    sha256: Optional[str]  # the archive's sha256 hex when recorded
    editable: bool = False

    def local_file(self) -> Optional[Path]:
        """The recorded archive as a local path (file:// URL of a file), else None."""
        if not self.url.startswith("file://") or self.editable:
            return None
        from urllib.parse import unquote, urlsplit

        path = unquote(urlsplit(self.url).path)
        return Path(path) if os.path.isabs(path) else None


def _parse(doc: Any) -> Optional[DirectOrigin]:
    if not isinstance(doc, dict) or not isinstance(doc.get("url"), str):
        return None
    url = str(doc["url"])[:4096]
    archive = obj(doc, "archive_info")
    digest: Optional[str] = None
    hashes = archive.get("hashes")
    if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
        digest = str(hashes["sha256"])
    elif isinstance(archive.get("hash"), str) and str(archive["hash"]).startswith("sha256="):
        digest = str(archive["hash"])[len("sha256="):]
    if digest is not None and not re.fullmatch(r"[0-9a-f]{64}", digest):
        digest = None
    return DirectOrigin(url, digest, flag(obj(doc, "dir_info"), "editable"))


def direct_origins(env: Path) -> dict[str, DirectOrigin]:
    """canonical name -> where it came from, for each distribution of the env that was not
    installed from an index (one with a readable direct_url.json; an unreadable one counts as
    not from an index: its origin is unknown, so it is not carried by name)."""
    out: dict[str, DirectOrigin] = {}
    for sp in site_packages_dirs(env):
        for info in sorted(sp.glob("*.dist-info")):
            marker = info / "direct_url.json"
            if not marker.exists() and not marker.is_symlink():
                continue
            name = canonical_name(info.name[: -len(".dist-info")].rsplit("-", 1)[0])
            try:
                with open(marker, "rb") as fh:
                    raw = fh.read(MAX_BYTES + 1)
                found = _parse(json.loads(raw)) if len(raw) <= MAX_BYTES else None
            except (OSError, ValueError):
                found = None
            out.setdefault(name, found or DirectOrigin("unknown", None))
    return out
