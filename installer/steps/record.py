"""snapshot.record: the known-good record written after verification.

Uses installer.snapshot.model (the snapshot issue's format and writer) when it is there;
until then a minimal versioned YAML (`format: 1`) in <state>/snapshots/.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

from installer.context import Context
from installer.files import atomic_write, remove_file
from installer.steps.base import Step, UndoRecord, checkpoint


def _distributions(env: Path) -> list[str]:
    out = []
    for sp in sorted(Path(env).glob("lib/python*/site-packages")):
        for d in sorted(sp.glob("*.dist-info")):
            name, _, version = d.name[: -len(".dist-info")].partition("-")
            out.append(f"{name}=={version}")
    return out


def _verification(ctx: Context, env: Path) -> Optional[dict[str, Any]]:
    """What verify.run found: this run's result, else its stored record (verify skipped)."""
    res = ctx.extra.get("results", {}).get("verify.run")
    out: dict[str, Any] = dict(res) if isinstance(res, dict) else {}
    try:
        from installer.verify.host import read_record

        doc = read_record(ctx, env)
    except Exception:  # no verify module or no record: the snapshot says so (None)
        doc = None
    if isinstance(doc, dict):
        report = doc.get("report")
        out.setdefault("ok", bool(report.get("ok")) if isinstance(report, dict) else None)
        out.setdefault("report", report)
        out.setdefault("verified_at", doc.get("created") or doc.get("ts"))
    return out or None


class RecordSnapshot(Step):
    id = "snapshot.record"
    fingerprinted = True  # re-recorded only when the env changed since the last record

    def __init__(
        self,
        env: Path,
        backend: str = "venv",
        resolution: Optional[dict[str, Any]] = None,
        cpu_only: bool = False,
    ) -> None:
        self.env = Path(env)
        self.backend = backend
        self.resolution = resolution or {}
        self.cpu_only = cpu_only
        self._id: Optional[str] = None

    def snapshot_id(self) -> str:
        """Chosen once per run, so touches() can name the file apply() writes (a kill right
        after the write is then undone like any other touched file)."""
        if self._id is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            self._id = f"{stamp}-known-good-{os.urandom(3).hex()}"
        return self._id

    def snapshot_path(self, ctx: Context) -> Path:
        return self.snapshots_dir(ctx) / f"{self.snapshot_id()}.yaml"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.snapshot_path(ctx))]

    def describe(self) -> str:
        return "record the known-good snapshot"

    def snapshots_dir(self, ctx: Context) -> Path:
        return ctx.state_dir / "snapshots"  # = installer.snapshot.model.store_dir(ctx.state_dir)

    def check(self, ctx: Context) -> bool:
        return False  # the executor's fingerprint check makes a re-run skip this

    def _gpu_verified(self, verification: Optional[dict[str, Any]]) -> bool:
        if self.cpu_only or not verification:
            return False
        if "gpu_verified" in verification:
            return bool(verification["gpu_verified"])
        return bool(verification.get("ok"))

    def minimal_document(self, ctx: Context) -> dict[str, Any]:
        """The format-1 record (used when installer.snapshot.model is unavailable)."""
        verification = _verification(ctx, self.env)
        return {
            "format": 1,
            "kind": "known-good",
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "env": {"path": str(self.env), "backend": self.backend},
            "resolution": self.resolution,
            "packages": _distributions(self.env),
            "verification": verification,
            "gpu_verified": self._gpu_verified(verification),
        }

    def apply(self, ctx: Context) -> UndoRecord:
        verification = _verification(ctx, self.env)
        gpu_verified = self._gpu_verified(verification)
        try:
            from installer.snapshot import model as snapmod
            from installer.snapshot.build import build
        except ImportError:
            snapmod = None  # type: ignore[assignment]
        checkpoint(ctx, self.id, "middle")
        if snapmod is not None:
            snap = build(
                ctx,
                self.env,
                "known-good",
                facts=ctx.extra.get("facts"),
                resolution=self.resolution,
                verification=dict(verification or {}, gpu_verified=gpu_verified),
                hashes=False,  # known-good records are local; `snapshot export` adds published hashes
            )
            from dataclasses import replace

            snap = replace(snap, id=self.snapshot_id())
            path = snapmod.save(ctx.state_dir, snap)
            return {"path": str(path), "id": snap.id, "gpu_verified": gpu_verified}
        import yaml

        path = self.snapshot_path(ctx)
        atomic_write(path, yaml.safe_dump(self.minimal_document(ctx), sort_keys=False))
        return {"path": str(path), "id": path.stem, "gpu_verified": gpu_verified}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        # The record describes an env that no longer exists after rollback.
        if record.get("path"):
            remove_file(Path(record["path"]))
