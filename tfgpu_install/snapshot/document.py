"""The snapshot document's types: frozen dataclasses, built only by snapshot/schema.py from a
checked document (or by snapshot/build.py from a live env); to_dict() is the one place that
turns one back into plain data (YAML/JSON out). The store and (de)serialisation: model.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from tfgpu_install.conda.prefix import CondaRecord
from tfgpu_install.env.layout import canonical_name
from tfgpu_install.resolver.model import Choice, Resolution

FORMAT = 2


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
    # What its installed files must be: "sha256:<hex>" over its RECORD (env/builds.py), taken when
    # the snapshot was; None in snapshots older than that (the build is then unknown, not "identical").
    content: Optional[str] = None

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
class EnvRecord:
    """Where the env was, its backend and Python, and a conda env's own packages."""

    path: Optional[str] = None
    backend: Optional[str] = None  # "venv" | "conda"
    python: Optional[str] = None  # "3.11.7"
    conda_packages: Optional[tuple[CondaRecord, ...]] = None  # None: not recorded (a venv)
    other: tuple[tuple[str, Optional[str]], ...] = ()  # any other text field, as read (used by nothing)
    keys: tuple[str, ...] = ("path", "backend", "python")  # the block's keys in order, as read or built

    def to_json(self) -> dict[str, object]:
        known: dict[str, object] = {"path": self.path, "backend": self.backend, "python": self.python}
        more: dict[str, object] = dict(self.other)
        if self.conda_packages is not None:
            more = {"conda_packages": [r.to_json() for r in self.conda_packages], **more}
        out = {k: {**known, **more}[k] for k in self.keys if k in known or k in more}
        return {**out, **{k: v for k, v in more.items() if k not in out}}


@dataclass(frozen=True)
class RecordedResolution:
    """What the env was resolved to: the resolver's own Resolution (its Choice) as the install
    journaled it, and the user's added requirements (--with, `add`). An older shape (format 1's
    flat combination, a journaled plan {"resolution", "options"}) is read into the same types and
    kept as read (`as_read`), so writing it back gives the same bytes; the shape the tool writes
    today needs no copy."""

    resolution: Optional[Resolution] = None  # None: nothing was recorded
    added: tuple[str, ...] = ()
    as_read: Optional[dict[str, object]] = None  # the block as read, when to_json() would write another

    @property
    def choice(self) -> Optional[Choice]:
        return self.resolution.choice if self.resolution else None

    @property
    def cpu_only(self) -> bool:
        return bool(self.resolution and self.resolution.cpu_only)

    def to_json(self) -> dict[str, object]:
        if self.as_read is not None:
            return dict(self.as_read)
        out: dict[str, object] = dict(self.resolution.to_json()) if self.resolution else {}
        return {**out, "added": list(self.added)} if self.added else out


@dataclass(frozen=True)
class Verification:
    """What the env's last verification found when the snapshot was taken; the check's own report
    is kept as the check wrote it (VerifyReport.to_json(), verify/host.py)."""

    ok: Optional[bool] = None
    gpu_verified: Optional[bool] = None
    verified_at: Optional[str] = None
    mode: Optional[str] = None  # "gpu" | "cpu" (this run's verify.run said)
    record: Optional[str] = None  # the verify.json it came from (this run's verify.run said)
    report: Optional[dict[str, object]] = None
    other: tuple[tuple[str, object], ...] = ()  # any other field, as read (used by nothing)
    keys: tuple[str, ...] = ()  # the block's keys in order, as read or built

    def to_json(self) -> dict[str, object]:
        known: dict[str, object] = {"ok": self.ok, "gpu_verified": self.gpu_verified, "verified_at": self.verified_at,
                                    "mode": self.mode, "record": self.record, "report": self.report, **dict(self.other)}
        return {k: known[k] for k in self.keys if k in known}


@dataclass(frozen=True)
class Snapshot:
    id: str
    kind: str
    created: str  # ISO 8601 UTC
    env: EnvRecord
    host: HostContract
    resolution: RecordedResolution
    packages: tuple[Package, ...]
    files: tuple[FileRecord, ...] = ()
    activation: dict[str, str] = field(default_factory=dict)  # relative file -> our marked block text
    verification: Optional[Verification] = None
    tool: str = ""
    format: int = FORMAT
    notes: tuple[str, ...] = ()

    def package_map(self) -> dict[str, Package]:
        return {p.key: p for p in self.packages}

    def builds(self) -> Optional[dict[str, tuple[str, str]]]:
        """canonical name -> (version, content digest): what each package's files must be (the file
        check's `expected`); None when the snapshot records no build at all (older than that)."""
        found = {p.key: (p.version, p.content) for p in self.packages if p.content}
        return found or None

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["env"] = self.env.to_json()
        d["resolution"] = self.resolution.to_json()
        d["verification"] = self.verification.to_json() if self.verification is not None else None
        d["host"]["gpus"] = [dict(g) for g in self.host.gpus]
        d["packages"] = [
            {"name": p.name, "version": p.version, "hashes": list(p.hashes),
             **({"content": p.content} if p.content else {})} for p in self.packages
        ]
        d["files"] = [asdict(f) for f in self.files]
        d["notes"] = list(self.notes)
        # Stable key order: format first, so `head` shows what a file is.
        order = ["format", "id", "kind", "created", "tool", "env", "host", "resolution", "packages",
                 "files", "activation", "verification", "notes"]
        return {k: d[k] for k in order}
