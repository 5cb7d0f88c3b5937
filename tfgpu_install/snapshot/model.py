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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.errors import BadInputError
from tfgpu_install.files import atomic_write
from tfgpu_install.snapshot import reader, schema
from tfgpu_install.snapshot.document import FORMAT as FORMAT
from tfgpu_install.snapshot.document import EnvRecord as EnvRecord
from tfgpu_install.snapshot.document import FileRecord as FileRecord
from tfgpu_install.snapshot.document import HostContract as HostContract
from tfgpu_install.snapshot.document import Package as Package
from tfgpu_install.snapshot.document import RecordedResolution as RecordedResolution
from tfgpu_install.snapshot.document import Snapshot as Snapshot

KINDS = ("known-good", "rollback-point", "export")


# The env's own installer, seeded by env.create (--no-pip: none) from the interpreter's bundled wheel:
# tooling, not content. Left out of snapshots, drift and upgrade's carry-over, so a restore or an
# upgrade never has to find that exact pip on the index.
SEEDED = frozenset({"pip"})


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


def from_dict(d: Any, where: str = "snapshot") -> Snapshot:
    """A snapshot from plain data (parsed JSON, a test's dict); BAD_INPUT when it is not one."""
    if not isinstance(d, dict):
        raise BadInputError(f"{where}: not a snapshot document",
                            "pass a file written by `tfgpu-install snapshot export`")
    return schema.check(reader.node_of(d), where)


def loads(text: str, where: str = "snapshot") -> Snapshot:
    """Parse and check a snapshot's YAML: BAD_INPUT '<where>:<line>: ...' for anything malformed or
    hostile (aliases, deep nesting, huge values, wrong types), never another exception."""
    root = reader.parse(text, where)
    if not isinstance(root.value, dict):
        raise BadInputError(f"{where}:{root.line}: not a snapshot document (expected a mapping at the top)",
                            "pass a file written by `tfgpu-install snapshot export`", ref="bad-snapshot")
    return schema.check(root, where)


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
        if s.kind == kind and os.path.abspath(s.env.path or "") == target
    ]
    return found[-1] if found else None


def known_builds(state_dir: Path, env: Path) -> Optional[dict[str, tuple[str, str]]]:
    """What each distribution's files must be in `env` (Snapshot.builds()) by its latest known-good
    snapshot; None for an env without one (a new env: nothing to compare, the store is not read)."""
    import os

    if not os.path.isdir(env):
        return None
    found = latest_for_env(state_dir, env)
    return found[1].builds() if found else None
