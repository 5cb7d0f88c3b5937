"""What a conda prefix holds, read from its conda-meta/*.json records (no conda needed), and
whether a list of match specs is already met. Pure reads."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from tfgpu_install.knowledge.cuda_sources import spec_name


@dataclass(frozen=True)
class CondaRecord:
    name: str
    version: str
    build: str
    channel: str  # the channel or URL it came from ("" when the record does not say)
    sha256: str  # of the package archive ("" when the record does not say)

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "build": self.build,
                "channel": self.channel, "sha256": self.sha256}

    def pin(self) -> str:
        """An exact match spec: name=version=build."""
        return f"{self.name}={self.version}={self.build}"


def installed(prefix: Path) -> list[CondaRecord]:
    """Every package record in prefix/conda-meta, by name; unreadable records are skipped
    (a half-written one is what a killed conda leaves; the solver repairs it)."""
    out: list[CondaRecord] = []
    for meta in sorted((Path(prefix) / "conda-meta").glob("*.json")):
        try:
            doc: Any = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            continue
        out.append(CondaRecord(
            name=doc["name"],
            version=str(doc.get("version", "")),
            build=str(doc.get("build", "")),
            channel=str(doc.get("channel") or doc.get("url") or ""),
            sha256=str(doc.get("sha256") or ""),
        ))
    return out


def spec_version(spec: str) -> str:
    """The version part of `name=version[=build]` ("" for a bare name)."""
    rest = spec.split("::")[-1][len(spec_name(spec)):].lstrip("=")
    return rest.split("=")[0].strip()


def meets(record: CondaRecord, spec: str) -> bool:
    """conda's `name=1.2` means version 1.2 or 1.2.*; `name=1.2=build` also fixes the build."""
    if record.name != spec_name(spec):
        return False
    want = spec_version(spec)
    if want and not (record.version == want or record.version.startswith(want + ".")):
        return False
    parts = spec.split("::")[-1].split("=")
    return len(parts) < 3 or record.build == parts[2]


def unmet(records: Iterable[CondaRecord], specs: Iterable[str]) -> list[str]:
    have = list(records)
    return [s for s in specs if not any(meets(r, s) for r in have)]
