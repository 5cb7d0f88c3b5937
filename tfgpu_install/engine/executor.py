"""Run steps with a journal: check, journal "begin" (fsynced), apply, journal "done".

Resume is running again: check() skips what is in place. Rollback undoes the open
journal entries newest first. Before a step acts, the executor also records the state
of every path the step says it touches (files backed up by content, paths that did not
exist noted), so a run killed mid-step can still be rolled back byte-identical even
though the step never got to return its undo record.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.engine.env_lock import EnvLock

# In its own small module: install's no-op fast path computes it without the step machinery.
from tfgpu_install.env.fingerprint import env_fingerprint
from tfgpu_install.env.journal import Entry, Journal, current_epoch, open_entries, unfinished_run
from tfgpu_install.env.state import env_state_dir
from tfgpu_install.errors import DiskFull, EnvironmentProblem, StepFailed, TfgpuError, disk_full, is_disk_full
from tfgpu_install.files import atomic_write, sha256_file
from tfgpu_install.guard.jsondoc import JSONObject, JSONValue, integer, obj, objects, text
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

# Backups of touched files are kept by content; bigger files are only hashed (a step that
# rewrites a big file must carry its own undo data).
_BACKUP_LIMIT = 16 << 20


@dataclass(frozen=True)
class StepReport:
    id: str
    describe: str
    status: str  # "done" (already in place) | "unchanged" | "applied" | "pending" (dry run) | "undone"
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "describe": self.describe, "status": self.status, "detail": self.detail}


@dataclass
class ExecReport:
    steps: list[StepReport] = field(default_factory=list)
    results: dict[str, UndoRecord] = field(default_factory=dict)  # step id -> record, for the steps applied

    @property
    def changed(self) -> bool:
        return any(s.status in ("applied", "undone") for s in self.steps)

    def to_json(self) -> list[dict[str, str]]:
        return [s.to_json() for s in self.steps]


# --- recording and restoring what a step touches ------------------------------------------


def _record_pre(paths: Iterable[str], backups: Path) -> list[JSONObject]:
    pre: list[JSONObject] = []
    for raw in paths:
        p = Path(raw)
        item: JSONObject = {"path": str(p)}
        if p.is_symlink():
            item.update(kind="link", target=os.readlink(p))
        elif p.is_file():
            digest = sha256_file(p)
            item.update(kind="file", sha256=digest, mode=p.stat().st_mode & 0o7777)
            if p.stat().st_size <= _BACKUP_LIMIT:
                dest = backups / digest
                if not dest.exists():
                    atomic_write(dest, p.read_bytes(), mode=0o600)
                item["backup"] = digest
        elif p.is_dir():
            item.update(kind="dir")
        else:
            item.update(kind="missing")
            # The highest missing ancestor: directories apply creates on the way are ours too.
            top = p
            while not top.parent.exists() and top.parent != top:
                top = top.parent
            if top != p:
                item["created_from"] = str(top)
        pre.append(item)
    return pre


def _remove_path(p: Path) -> None:
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)


def prune_created_dirs(pre: Sequence[Mapping[str, JSONValue]]) -> None:
    """Remove the empty directories a step created above a path that did not exist before."""
    for item in pre:
        top = text(item, "created_from")
        if item.get("kind") != "missing" or not top:
            continue
        p = Path(str(item["path"]))
        if p.exists() or p.is_symlink():
            continue
        d = p.parent
        while True:
            try:
                d.rmdir()  # only when empty
            except OSError:
                break
            if d == Path(top) or d.parent == d:
                break
            d = d.parent


def restore_pre(pre: Sequence[Mapping[str, JSONValue]], backups: Path,
                owned: Callable[[Path], bool] = lambda p: True) -> None:
    """Put every recorded path back as it was before the step began (a path that was not there
    is removed while the step `owned` it: Step.owns)."""
    for item in pre:
        p = Path(str(item["path"]))
        kind = item.get("kind")
        mode = integer(item, "mode")
        mode = 0o644 if mode is None else mode
        if kind == "missing":
            if (p.exists() or p.is_symlink()) and owned(p):
                _remove_path(p)
        elif kind == "file":
            if p.is_file() and not p.is_symlink() and sha256_file(p) == item.get("sha256"):
                os.chmod(p, mode)
                continue
            src = backups / str(item.get("backup", ""))
            if item.get("backup") and src.is_file():
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                atomic_write(p, src.read_bytes(), mode=mode)
        elif kind == "link":
            if os.path.islink(p) and os.readlink(p) == item.get("target"):
                continue
            if p.exists() or p.is_symlink():
                _remove_path(p)
            os.symlink(str(item.get("target")), p)
        # "dir": it existed before; its contents are the step's undo to put back.


def _begin_of(entries: Sequence[Entry], entry: Entry) -> Entry:
    """The "begin" a "done" closes (the nearest one before it for the same step)."""
    if entry.event == "begin":
        return entry
    for e in reversed(entries):
        if e.seq < entry.seq and e.event == "begin" and e.step == entry.step:
            return e
    return entry


# --- errors -------------------------------------------------------------------------------


# A tool the step ran (uv, pip, venv) hit a full disk: its output says so, in Python's or Rust's words.
_NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]|os error (?:28|122)\b")
_NO_SPACE_PATH = re.compile(r"\[Errno (?:28|122)\][^'\n]*?: '([^'\n]+)'")


def _tool_disk_full(step: Step, err: TfgpuError, env: Path) -> Optional[TfgpuError]:
    """DiskFull for a step whose tool failed on a full disk (the path it names, else the env)."""
    if isinstance(err, DiskFull) or not _NO_SPACE.search(err.message):
        return None
    named = _NO_SPACE_PATH.search(err.message)
    quota = "quota" in err.message.lower() or "122" in err.message
    cause = OSError(errno.EDQUOT if quota else errno.ENOSPC, "")
    return disk_full(named.group(1) if named else env, cause, undo=True,
                     doing=f"while running {step.id}: {step.describe()} ({err.message[-300:].strip()})")


def _os_error(step: Step, exc: OSError, env: Path) -> TfgpuError:
    where = f" ({exc.filename})" if exc.filename else ""
    after = "then run the same command again to resume, or `tfgpu-install rollback` to undo"
    if is_disk_full(exc):
        # The file being written when the kernel said so, else the env the step writes into.
        path = exc.filename if os.path.isabs(str(exc.filename or "")) else env
        return disk_full(path, exc, doing=f"while running {step.id}: {step.describe()}", undo=True)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return EnvironmentProblem(
            f"no permission to write while running {step.id}{where}: {exc.strerror}",
            hint=f"choose a writable --env (or fix its ownership), {after}",
            ref="no-permission",
        )
    return StepFailed(f"{step.id} failed: {exc}", hint=after.capitalize())


# --- the executor ------------------------------------------------------------------------


class Executor:
    def __init__(
        self,
        ctx: Context,
        env: Path,
        journal: Optional[Journal] = None,
        plan: Optional[Mapping[str, object]] = None,
        fingerprint: Optional[Callable[[], str]] = None,
    ) -> None:
        self.ctx = ctx
        self.env = Path(env)
        self.journal = journal or Journal.for_env(ctx, self.env)
        self.plan = plan
        self.backups = env_state_dir(ctx, self.env) / "backups"
        self._fingerprint = fingerprint or (lambda: env_fingerprint(self.env))

    def lock(self, wait: bool = False) -> EnvLock:
        """Keyed by the env's real path (its parent created first): every spelling of one env
        (a symlinked parent, '//path') meets the same lock."""
        from tfgpu_install.guard.envpath import real_env_path

        return EnvLock(env_state_dir(self.ctx, real_env_path(self.env)) / "lock", self.env, wait=wait)

    def _last_fingerprints(self) -> dict[str, str]:
        """step id -> fingerprint of its newest open "done" entry."""
        out: dict[str, str] = {}
        for e in reversed(open_entries(self.journal.entries())):
            if e.event == "done" and e.step and e.data.get("fingerprint"):
                out[e.step] = str(e.data["fingerprint"])
        return out

    def preview(self, step: Step, fingerprints: Optional[dict[str, str]] = None) -> StepReport:
        """What a run would do with this step, from its check() alone (read-only)."""
        if step.check(self.ctx):
            return StepReport(step.id, step.describe(), "done")
        if getattr(step, "fingerprinted", False):
            fps = self._last_fingerprints() if fingerprints is None else fingerprints
            if step.id in fps and fps[step.id] == self._fingerprint():
                return StepReport(step.id, step.describe(), "unchanged", "nothing changed since it last ran")
        return StepReport(step.id, step.describe(), "pending")

    def run(self, steps: Sequence[Step], dry_run: bool = False) -> ExecReport:
        report = ExecReport()
        results = report.results
        fingerprints = self._last_fingerprints()
        started = False
        total = float(len(steps))
        for i, step in enumerate(steps):
            self.ctx.progress(f"provisioning: {step.id}: {step.describe()}", float(i), total)
            state = self.preview(step, fingerprints)
            if dry_run or state.status != "pending":
                report.steps.append(state)
                continue
            if not started:
                self.journal.append("run", env=str(self.env), plan=self.plan, ends=1)
                started = True
            self._apply(step, results)
            report.steps.append(StepReport(step.id, step.describe(), "applied"))
        if started:
            self.journal.append("finished")  # `envs` tells a run that stopped from one that ended
        self.ctx.progress("provisioning: done", total, total)
        return report

    def mark_finished(self) -> None:
        """Every step checks as in place, but the newest run stopped before it said so (killed
        after its last step): the journal says it ended. Under the env's lock; a busy env is left."""
        from tfgpu_install.errors import TfgpuError

        if not unfinished_run(self.journal.entries()):
            return
        try:
            with self.lock(wait=False):
                if unfinished_run(self.journal.entries()):
                    self.journal.append("finished")
        except TfgpuError:
            pass  # another run holds the env: it will say how it ended

    def _apply(self, step: Step, results: dict[str, UndoRecord]) -> None:
        # A step gets what the steps before it in this run returned (env.create's "created",
        # verify.run's result for the snapshot) as an argument, by value: only what it names.
        ctx = self.ctx
        earlier = MappingProxyType({k: results[k] for k in step.needs if k in results})
        checkpoint(ctx, step.id, "before")
        touches = [str(t) for t in step.touches(ctx)]
        try:
            pre = _record_pre(touches, self.backups)
            self.journal.append("begin", step=step.id, touches=touches, pre=pre)
            began = time.monotonic()
            record = step.apply_with(ctx, earlier)
            took = time.monotonic() - began
            checkpoint(ctx, step.id, "after")
        except TfgpuError as err:
            self._journal_failure(step, err)
            full = _tool_disk_full(step, err, self.env)
            if full is not None:
                raise full from err
            raise
        except OSError as exc:
            self._journal_failure(step, exc)
            raise _os_error(step, exc, self.env) from exc
        except Exception as exc:
            self._journal_failure(step, exc)
            raise StepFailed(
                f"{step.id} failed: {type(exc).__name__}: {exc}",
                hint="re-run with --debug for details; run again to resume, or `tfgpu-install rollback`",
            ) from exc
        # seconds: what the step itself took (the bench subtracts verify.run's; users see slow steps)
        fields: JSONObject = {"step": step.id, "undo": record, "seconds": round(took, 4)}
        if getattr(step, "fingerprinted", False):
            fields["fingerprint"] = self._fingerprint()
        # Not fsynced on its own: the next "begin" syncs the file before anything else is
        # changed, and a "done" lost to a power cut only means the step is checked again.
        self.journal.append("done", durable=False, **fields)
        results[step.id] = record

    def _owned_by(self, step: Optional[Step]) -> Callable[[Path], bool]:
        if step is None:
            return lambda path: True
        return lambda path: step.owns(self.ctx, path)

    def _journal_failure(self, step: Step, exc: BaseException) -> None:
        try:
            self.journal.append("failed", step=step.id, error=f"{type(exc).__name__}: {exc}")
        except (OSError, TfgpuError):
            pass  # the disk may be the problem (DiskFull); the open "begin" still says what to undo

    def rollback(self, steps: Sequence[Step], to_seq: Optional[int] = None) -> ExecReport:
        """Undo every open journal entry (newest first), or only those after line `to_seq`."""
        by_id = {s.id: s for s in steps}
        report = ExecReport()
        entries = self.journal.entries()
        todo: list[Entry] = [e for e in open_entries(entries) if to_seq is None or e.seq > to_seq]
        for e in todo:
            step = by_id.get(str(e.step))
            desc = step.describe() if step else str(e.step)
            checkpoint(self.ctx, str(e.step), "undo")
            try:
                if e.event == "done":
                    if step is None:
                        raise StepFailed(f"cannot undo {e.step}: this version does not know that step")
                    step.undo(self.ctx, dict(obj(e.data, "undo")))
                else:
                    # Killed or failed mid-apply: put the touched paths back, then let the
                    # step clean up whatever else it may have half-done.
                    restore_pre(objects(e.data, "pre"), self.backups, owned=self._owned_by(step))
                    if step is not None:
                        step.undo(self.ctx, {"partial": True})
                prune_created_dirs(objects(_begin_of(entries, e).data, "pre"))
            except TfgpuError:
                raise
            except OSError as exc:
                if is_disk_full(exc):
                    raise disk_full(exc.filename or "?", exc, doing=f"while undoing {e.step}") from exc
                raise EnvironmentProblem(
                    f"rollback of {e.step} failed: {exc}",
                    hint="fix the cause and run `tfgpu-install rollback` again (it resumes)",
                ) from exc
            self.journal.append("undone", step=e.step, seq=e.seq)
            detail = "interrupted step" if e.event == "begin" else ""
            report.steps.append(StepReport(str(e.step), desc, "undone", detail))
        if todo or any(e.event != "rolled-back" for e in current_epoch(entries)):
            if to_seq is not None:
                self.journal.append("rolled-back", to=to_seq)
            else:
                self.journal.append("rolled-back")
        return report
