"""Snapshots: the tool's memory of an environment (format 2; format 1 still loads).

A snapshot holds the host contract (driver, max CUDA, GPUs and compute capabilities,
glibc, arch), the resolved combination, every installed distribution with its version
and the sha256 of the files it is published as, placed/library files with sha256, the
activation blocks, and the verification result. Rollback points and known-good
records are snapshots; `snapshot export` writes one for a user.

Format history:
  1  the minimal record the install wrote first: {format: 1, env, resolution, packages:
     ["name==version", ...]} (no hashes, no host contract).
  2  this module's full document.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from installer.errors import BadInputError
from installer.files import atomic_write

FORMAT = 2
KINDS = ("known-good", "rollback-point", "export")


@dataclass(frozen=True)
class HostContract:
    driver: Optional[str] = None
    max_cuda: Optional[str] = None
    glibc: Optional[str] = None
    arch: Optional[str] = None
    os: Optional[str] = None
    gpus: tuple[dict[str, Optional[str]], ...] = ()  # [{"name", "compute_capability"}]


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    hashes: tuple[str, ...] = ()  # "sha256:<hex>" of the files this version is published as

    @property
    def key(self) -> str:
        return canonical_name(self.name)

    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class FileRecord:
    path: str  # relative to the env root
    sha256: str
    size: int
    mtime_ns: int = 0  # a cache key only: same size and mtime -> not re-hashed by `check`


@dataclass(frozen=True)
class Snapshot:
    id: str
    kind: str
    created: str  # ISO 8601 UTC
    env: dict[str, Any]  # {"path", "backend", "name", "python"}
    host: HostContract
    resolution: dict[str, Any]  # {"profile","tensorflow","cuda","cudnn","python","jit_only","pins",...}
    packages: tuple[Package, ...]
    files: tuple[FileRecord, ...] = ()
    activation: dict[str, str] = field(default_factory=dict)  # relative file -> our marked block text
    verification: Optional[dict[str, Any]] = None
    tool: str = ""
    format: int = FORMAT
    notes: tuple[str, ...] = ()

    def package_map(self) -> dict[str, Package]:
        return {p.key: p for p in self.packages}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["host"]["gpus"] = [dict(g) for g in self.host.gpus]
        d["packages"] = [
            {"name": p.name, "version": p.version, "hashes": list(p.hashes)} for p in self.packages
        ]
        d["files"] = [asdict(f) for f in self.files]
        d["notes"] = list(self.notes)
        # Stable key order: format first, so `head` shows what a file is.
        order = ["format", "id", "kind", "created", "tool", "env", "host", "resolution", "packages",
                 "files", "activation", "verification", "notes"]
        return {k: d[k] for k in order}


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def new_id(kind: str, now: Optional[float] = None) -> str:
    import os

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return f"{stamp}-{kind}-{os.urandom(3).hex()}"


def now_iso(now: Optional[float] = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


# --- (de)serialisation ---------------------------------------------------------------------


def dumps(snap: Snapshot) -> str:
    import yaml

    header = f"# tfgpu-install snapshot (format {FORMAT}); restore with: tfgpu-install snapshot restore FILE\n"
    return header + yaml.safe_dump(snap.to_dict(), sort_keys=False, default_flow_style=False, width=100)


def _need(d: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in d:
        raise BadInputError(f"{where}: missing key '{key}'", "the file is not a complete tfgpu-install snapshot")
    val = d[key]
    if not isinstance(val, kind):
        raise BadInputError(
            f"{where}: '{key}' should be a {kind.__name__}, found {type(val).__name__}",
            "the snapshot was edited by hand or is damaged; export it again",
        )
    return val


def _from_v1(d: dict[str, Any], where: str) -> Snapshot:
    """Format 1: the minimal rollback record. Packages are 'name==version' strings."""
    pkgs = []
    for item in d.get("packages") or []:
        if isinstance(item, str) and "==" in item:
            name, ver = item.split("==", 1)
            pkgs.append(Package(name.strip(), ver.strip()))
        elif isinstance(item, dict) and "name" in item:
            pkgs.append(Package(str(item["name"]), str(item.get("version", ""))))
    env = d.get("env") or {}
    if isinstance(env, str):
        env = {"path": env}
    return Snapshot(
        id=str(d.get("id") or "legacy"),
        kind=str(d.get("kind") or "rollback-point"),
        created=str(d.get("created") or ""),
        env=dict(env),
        host=HostContract(),
        resolution=dict(d.get("resolution") or {}),
        packages=tuple(pkgs),
        verification=d.get("verification"),
        tool=str(d.get("tool") or ""),
        format=1,
        notes=("loaded from format 1: no host contract and no hashes",),
    )


def from_dict(d: Any, where: str = "snapshot") -> Snapshot:
    if not isinstance(d, dict):
        raise BadInputError(f"{where}: not a snapshot document", "pass a file written by `tfgpu-install snapshot export`")
    fmt = d.get("format")
    if fmt == 1:
        return _from_v1(d, where)
    if fmt != FORMAT:
        raise BadInputError(
            f"{where}: snapshot format {fmt!r} is not one this version reads (1, {FORMAT})",
            "upgrade tfgpu-install to read newer snapshots",
        )
    host = _need(d, "host", dict, where)
    pkgs = []
    for i, p in enumerate(_need(d, "packages", list, where)):
        if not isinstance(p, dict) or "name" not in p or "version" not in p:
            raise BadInputError(f"{where}: packages[{i}] needs 'name' and 'version'", "export the snapshot again")
        pkgs.append(Package(str(p["name"]), str(p["version"]), tuple(str(h) for h in p.get("hashes") or ())))
    files = []
    for i, f in enumerate(d.get("files") or []):
        try:
            files.append(FileRecord(str(f["path"]), str(f["sha256"]), int(f["size"]), int(f.get("mtime_ns", 0))))
        except (KeyError, TypeError, ValueError):
            raise BadInputError(f"{where}: files[{i}] needs path, sha256 and size", "export the snapshot again")
    return Snapshot(
        id=str(_need(d, "id", str, where)),
        kind=str(d.get("kind") or "export"),
        created=str(d.get("created") or ""),
        env=dict(_need(d, "env", dict, where)),
        host=HostContract(
            driver=host.get("driver"),
            max_cuda=host.get("max_cuda"),
            glibc=host.get("glibc"),
            arch=host.get("arch"),
            os=host.get("os"),
            gpus=tuple(dict(g) for g in host.get("gpus") or ()),
        ),
        resolution=dict(d.get("resolution") or {}),
        packages=tuple(pkgs),
        files=tuple(files),
        activation={str(k): str(v) for k, v in (d.get("activation") or {}).items()},
        verification=d.get("verification"),
        tool=str(d.get("tool") or ""),
        notes=tuple(str(n) for n in d.get("notes") or ()),
    )


def loads(text: str, where: str = "snapshot") -> Snapshot:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise BadInputError(
            f"{where}{line}: not valid YAML ({getattr(exc, 'problem', exc)})",
            "the snapshot file is damaged; export it again or restore an older one",
        ) from exc
    return from_dict(data, where)


def load(path: Path) -> Snapshot:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise BadInputError(f"no snapshot file at {path}", "`tfgpu-install snapshot list` shows the stored ones")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read snapshot {path}: {exc}", "check the path and its permissions")
    return loads(text, str(path))


def write(path: Path, snap: Snapshot) -> None:
    """Atomic: a reader sees the old file or the new one, never half of one."""
    atomic_write(Path(path), dumps(snap))


# --- the store under the state dir ----------------------------------------------------------


def store_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "snapshots"


def save(state_dir: Path, snap: Snapshot) -> Path:
    path = store_dir(state_dir) / f"{snap.id}.yaml"
    write(path, snap)
    return path


def list_stored(state_dir: Path) -> list[tuple[Path, Snapshot]]:
    """Stored snapshots, oldest first; unreadable files are skipped (listed by `snapshot list` as damaged)."""
    out = []
    for path in sorted(store_dir(state_dir).glob("*.yaml")):
        try:
            out.append((path, load(path)))
        except BadInputError:
            continue
    out.sort(key=lambda item: (item[1].created, item[1].id))
    return out


def find(state_dir: Path, ref: str) -> tuple[Path, Snapshot]:
    """A snapshot by file path, full id, or unique id prefix."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p, load(p)
    matches = [(path, s) for path, s in list_stored(state_dir) if s.id == ref or s.id.startswith(ref)]
    exact = [m for m in matches if m[1].id == ref]
    if exact:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise BadInputError(f"no snapshot '{ref}'", "`tfgpu-install snapshot list` shows the stored ones")
    raise BadInputError(
        f"'{ref}' matches {len(matches)} snapshots", "give more of the id: " + ", ".join(s.id for _, s in matches[:5])
    )


def latest_for_env(state_dir: Path, env: Path, kind: str = "known-good") -> Optional[tuple[Path, Snapshot]]:
    import os

    target = os.path.abspath(str(env))
    found = [
        (p, s) for p, s in list_stored(state_dir)
        if s.kind == kind and os.path.abspath(str(s.env.get("path", ""))) == target
    ]
    return found[-1] if found else None


def with_kind(snap: Snapshot, kind: str) -> Snapshot:
    return replace(snap, kind=kind, id=new_id(kind))
