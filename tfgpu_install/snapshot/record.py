"""snapshot.record: the known-good snapshot written after verification, into <state>/snapshots/."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Mapping, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.verification import BadRecord, read_record
from tfgpu_install.facts.model import Facts
from tfgpu_install.files import remove_file
from tfgpu_install.guard.jsondoc import JSONObject, JSONValue, text
from tfgpu_install.guard.shellquote import command
from tfgpu_install.snapshot.document import RecordedResolution
from tfgpu_install.snapshot.schema import verification_of
from tfgpu_install.steps.base import NOTHING_EARLIER, Step, UndoRecord, checkpoint


def _verification(ctx: Context, env: Path, res: Optional[UndoRecord]) -> Optional[JSONObject]:
    """What verify.run found: this run's result (`res`), else its stored record (verify skipped)."""
    out: JSONObject = dict(res) if isinstance(res, dict) else {}
    try:
        doc = read_record(ctx, env)
    except BadRecord:  # an unreadable record: the snapshot says so (None)
        doc = None
    if doc is not None:
        report = doc.report
        out.setdefault("ok", bool(report.ok) if report is not None else None)
        out.setdefault("report", dict(report.raw) if report is not None else None)
        out.setdefault("verified_at", doc.created)
    return out or None


def _refuse_damaged(ctx: Context, env: Path) -> None:
    """Never bless a damaged env: its installed files must match their records now."""
    from tfgpu_install.env.integrity import check_installed
    from tfgpu_install.env.state import hash_cache
    from tfgpu_install.errors import StepFailed

    found = check_installed(env, cache=hash_cache(ctx, env))
    if found.clean:
        return
    lines = found.lines()
    raise StepFailed(
        f"not recording a known-good snapshot: {len(lines)} installed file(s) differ from their "
        f"distributions' records ({'; '.join(lines[:3])}{'; ...' if len(lines) > 3 else ''})",
        hint=f"`{command(ctx, 'tfgpu-install', 'check', '--env', str(env))}` lists them; run the install again to "
        "reinstall them, "
        "or `tfgpu-install rollback`",
    )


class RecordSnapshot(Step):
    id = "snapshot.record"
    fingerprinted = True  # re-recorded only when the env changed since the last record
    needs = ("verify.run",)  # this run's verification, when it ran (else its stored record)

    def __init__(
        self,
        env: Path,
        backend: str = "venv",
        resolution: Optional[RecordedResolution] = None,
        cpu_only: bool = False,
        facts: Optional[Facts] = None,
    ) -> None:
        self.env = Path(env)
        self.backend = backend
        self.resolution = resolution or RecordedResolution()
        self.cpu_only = cpu_only
        self.facts = facts  # this run's probe: the snapshot's host contract
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
        return ctx.state_dir / "snapshots"  # = snapshot.model.store_dir(ctx.state_dir)

    def check(self, ctx: Context) -> bool:
        return False  # the executor's fingerprint check makes a re-run skip this

    def _gpu_verified(self, verification: Optional[Mapping[str, JSONValue]]) -> bool:
        if self.cpu_only or not verification:
            return False
        if "gpu_verified" in verification:
            return bool(verification["gpu_verified"])
        return bool(verification.get("ok"))

    def apply(self, ctx: Context) -> UndoRecord:
        return self.apply_with(ctx, NOTHING_EARLIER)

    def apply_with(self, ctx: Context, earlier: Mapping[str, UndoRecord]) -> UndoRecord:
        _refuse_damaged(ctx, self.env)
        verification = _verification(ctx, self.env, earlier.get("verify.run"))
        gpu_verified = self._gpu_verified(verification)
        from dataclasses import replace

        from tfgpu_install.snapshot import model as snapmod
        from tfgpu_install.snapshot.build import build

        checkpoint(ctx, self.id, "middle")
        snap = build(
            ctx,
            self.env,
            "known-good",
            facts=self.facts,
            resolution=self.resolution,
            verification=verification_of(dict(verification or {}, gpu_verified=gpu_verified)),
            hashes=False,  # known-good records are local; `snapshot export` adds published hashes
        )
        snap = replace(snap, id=self.snapshot_id())
        path = snapmod.save(ctx.state_dir, snap)
        return {"path": str(path), "id": snap.id, "gpu_verified": gpu_verified}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        # The record describes an env that no longer exists after rollback.
        path = text(record, "path")
        if path:
            remove_file(Path(path))
