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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.env.layout import canonical_name
from tfgpu_install.errors import BadInputError
from tfgpu_install.files import atomic_write
from tfgpu_install.snapshot import reader, schema

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


# The env's own installer, seeded by env.create (--no-pip: none) from the interpreter's bundled wheel:
# tooling, not content. Left out of snapshots, drift and upgrade's carry-over, so a restore or an
# upgrade never has to find that exact pip on the index.
SEEDED = frozenset({"pip"})


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
    # libyaml's dumper where PyYAML has it (20x faster on a snapshot; long strings fold
    # differently, the document is the same); our own data, so no reader concerns here.
    dumper = getattr(yaml, "CSafeDumper", None) or yaml.SafeDumper
    return header + yaml.dump(snap.to_dict(), Dumper=dumper, sort_keys=False, default_flow_style=False, width=100)


def _from_v1(d: dict[str, Any]) -> Snapshot:
    """Format 1: the minimal rollback record (packages were 'name==version' strings)."""
    return Snapshot(
        id=d["id"], kind=d["kind"], created=d["created"], env=d["env"], host=HostContract(),
        resolution=d["resolution"], packages=tuple(Package(p["name"], p["version"]) for p in d["packages"]),
        verification=d["verification"], tool=d["tool"], format=1,
        notes=("loaded from format 1: no host contract and no hashes",),
    )


def _from_checked(d: dict[str, Any]) -> Snapshot:
    """A document schema.check() accepted: every type is what this needs."""
    if d["format"] == 1:
        return _from_v1(d)
    host = d["host"]
    return Snapshot(
        id=d["id"], kind=d["kind"], created=d["created"], env=d["env"],
        host=HostContract(driver=host["driver"], max_cuda=host["max_cuda"], glibc=host["glibc"],
                          arch=host["arch"], os=host["os"], gpus=tuple(host["gpus"])),
        resolution=d["resolution"],
        packages=tuple(Package(p["name"], p["version"], tuple(p["hashes"])) for p in d["packages"]),
        files=tuple(FileRecord(f["path"], f["sha256"], f["size"], f["mtime_ns"]) for f in d["files"]),
        activation=d["activation"], verification=d["verification"], tool=d["tool"], notes=tuple(d["notes"]),
    )


def from_dict(d: Any, where: str = "snapshot") -> Snapshot:
    """A snapshot from plain data (parsed JSON, a test's dict); BAD_INPUT when it is not one."""
    if not isinstance(d, dict):
        raise BadInputError(f"{where}: not a snapshot document",
                            "pass a file written by `tfgpu-install snapshot export`")
    return _from_checked(schema.check(reader.node_of(d), where))


def loads(text: str, where: str = "snapshot") -> Snapshot:
    """Parse and check a snapshot's YAML: BAD_INPUT '<where>:<line>: ...' for anything malformed or
    hostile (aliases, deep nesting, huge values, wrong types), never another exception."""
    root = reader.parse(text, where)
    if not isinstance(root.value, dict):
        raise BadInputError(f"{where}:{root.line}: not a snapshot document (expected a mapping at the top)",
                            "pass a file written by `tfgpu-install snapshot export`", ref="bad-snapshot")
    return _from_checked(schema.check(root, where))


def load(path: Path) -> Snapshot:
    try:
        from tfgpu_install.guard.bounded import read_bytes

        data = read_bytes(str(path), "snapshot")
    except FileNotFoundError:
        raise BadInputError(f"no snapshot file at {path}",
                            "`tfgpu-install snapshot list` shows the stored ones") from None
    except OSError as exc:
        raise BadInputError(f"cannot read snapshot {path}: {exc.strerror or exc}",
                            "check the path and its permissions") from exc
    return loads(reader.decode(data, str(path)), str(path))


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


@dataclass(frozen=True)
class Store:
    """What the snapshot store holds: the readable snapshots (oldest first) and, for each file
    that is not one, a line saying why (a warning: one bad file must not break every command)."""

    snapshots: tuple[tuple[Path, Snapshot], ...]
    damaged: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        return [f"skipped a damaged snapshot: {why}" for why in self.damaged]


def scan(state_dir: Path) -> Store:
    found: list[tuple[Path, Snapshot]] = []
    damaged: list[str] = []
    for path in sorted(store_dir(state_dir).glob("*.yaml")):
        try:
            found.append((path, load(path)))
        except BadInputError as err:
            damaged.append(err.message)
    found.sort(key=lambda item: (item[1].created, item[1].id))
    return Store(tuple(found), tuple(damaged))


def find(state_dir: Path, ref: str, store: Optional[Store] = None) -> tuple[Path, Snapshot]:
    """A snapshot by file path (any existing file, whatever its name), full id, or unique id prefix."""
    p = Path(ref)
    if p.is_file():
        return p, load(p)
    if p.exists():
        raise BadInputError(f"{ref} is not a snapshot file (not a regular file)",
                            "pass a file written by `tfgpu-install snapshot export`, or a stored snapshot's id")
    if "/" in ref:
        raise BadInputError(f"no snapshot file at {ref}", "`tfgpu-install snapshot list` shows the stored ones")
    store = store or scan(state_dir)
    matches = [(path, s) for path, s in store.snapshots if s.id == ref or s.id.startswith(ref)]
    exact = [m for m in matches if m[1].id == ref]
    if exact:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        skipped = f"; {len(store.damaged)} damaged file(s) skipped: {store.damaged[0]}" if store.damaged else ""
        raise BadInputError(f"no snapshot '{ref}'{skipped}", "`tfgpu-install snapshot list` shows the stored ones")
    raise BadInputError(
        f"'{ref}' matches {len(matches)} snapshots", "give more of the id: " + ", ".join(s.id for _, s in matches[:5])
    )


def latest_for_env(state_dir: Path, env: Path, kind: str = "known-good",
                   store: Optional[Store] = None) -> Optional[tuple[Path, Snapshot]]:
    import os

    target = os.path.abspath(str(env))
    found = [
        (p, s) for p, s in (store or scan(state_dir)).snapshots
        if s.kind == kind and os.path.abspath(str(s.env.get("path") or "")) == target
    ]
    return found[-1] if found else None
