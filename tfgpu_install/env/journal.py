"""The per-environment journal: append-only JSON lines, each fsynced before we act.

Events (every one carries "ts"):
  {"event": "run", "env", "plan": {...}, "ends": 1}        an install run starts changing things
  {"event": "begin", "step", "touches": [...], "pre": [...]} about to apply a step
  {"event": "done", "step", "undo": {...}, "fingerprint"?}   the step's effect is in place
  {"event": "failed", "step", "error"}                     apply raised (begin stays open)
  {"event": "finished"}                                    every step of the run is in place (a run
                                                           with "ends" gets one when it ends)
  {"event": "undone", "step", "seq"}                       rollback undid the entry at line `seq`
  {"event": "rolled-back", "to"?}                          a rollback finished
A kill can tear the last line only; reading skips a line that does not parse.
"""

from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.state import env_state_dir
from tfgpu_install.errors import disk_full, is_disk_full
from tfgpu_install.guard.jsondoc import JSONObject, integer


@dataclass(frozen=True)
class Entry:
    seq: int  # line number in the journal (0-based): stable id of this entry
    data: JSONObject  # the line as json.loads read it (fields are read with guard/jsondoc's readers)

    @property
    def event(self) -> str:
        return str(self.data.get("event", ""))

    @property
    def step(self) -> Optional[str]:
        s = self.data.get("step")
        return str(s) if s is not None else None


class Journal:
    def __init__(self, path: Path, root: Optional[Path] = None) -> None:
        self.path = Path(path)
        # the tool's state dir: the journal and every dir up to it must pass tfgpu_install/guard/trust.py
        self.root = Path(root) if root is not None else self.path.parent

    @classmethod
    def for_env(cls, ctx: Context, env: Path) -> "Journal":
        return cls(env_state_dir(ctx, env) / "journal.jsonl", ctx.state_dir)

    def exists(self) -> bool:
        return self.path.is_file()

    def append(self, event: str, durable: bool = True, **fields: Any) -> None:
        """One whole line, fsynced unless `durable` is False (a record whose loss only means a
        step is checked again: the next durable append syncs it along)."""
        record = {"event": event, "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **fields}
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        data = line.encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND + one write + fsync: the line is on disk before the caller acts.
            fd = os.open(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            if is_disk_full(exc):
                raise disk_full(self.path, exc, len(data), "appending to the journal") from exc
            raise
        try:
            self._heal_torn_tail(fd)
            self._write_whole(fd, data, durable)
        finally:
            os.close(fd)

    def _write_whole(self, fd: int, data: bytes, durable: bool = True) -> None:
        """All of the line or none of it: a full disk can take part of a write; cutting the file
        back keeps the journal a list of whole records (and the caller does not act)."""
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            if durable:
                os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass  # a torn last line is still skipped by entries() and healed by the next append
            if is_disk_full(exc):
                raise disk_full(self.path, exc, len(data), "appending to the journal") from exc
            raise

    def _heal_torn_tail(self, fd: int) -> None:
        """A kill mid-write can leave a last line without its newline: end it, so the next
        record starts on its own line (the torn one is skipped when reading)."""
        size = os.fstat(fd).st_size
        if size == 0:
            return
        with open(self.path, "rb") as fh:
            fh.seek(size - 1)
            if fh.read(1) != b"\n":
                os.write(fd, b"\n")

    def entries(self) -> list[Entry]:
        """The whole records; ENVIRONMENT (exit 6) when another user could have written the file
        (a forged undo must never be run by rollback)."""
        from tfgpu_install.guard.trust import require

        if not self.path.is_file():
            return []
        require(self.path, self.root, "the journal")
        out: list[Entry] = []
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for seq, line in enumerate(fh):
                try:
                    data = json.loads(line)
                except ValueError:
                    continue  # torn by a kill
                if isinstance(data, dict):
                    out.append(Entry(seq, data))
        return out

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())


def current_epoch(entries: list[Entry]) -> list[Entry]:
    """The entries after the last completed full rollback (what a rollback would undo)."""
    start = 0
    for i, e in enumerate(entries):
        if e.event == "rolled-back" and not e.data.get("to"):
            start = i + 1
    return entries[start:]


def open_entries(entries: list[Entry]) -> list[Entry]:
    """The "done" entries, and "begin" entries with no "done" (killed or failed mid-apply),
    that no rollback has undone yet: what to undo, newest first."""
    epoch = current_epoch(entries)
    undone = {seq for e in epoch if e.event == "undone" for seq in (integer(e.data, "seq"),) if seq is not None}
    todo: list[Entry] = []
    pending_begin: dict[str, Entry] = {}
    for e in epoch:
        if e.event == "begin" and e.step:
            # A second begin for a step means the first was interrupted: it stays open
            # (its pre-state is the one from before anything was touched).
            if e.step in pending_begin:
                todo.append(pending_begin[e.step])
            pending_begin[e.step] = e
        elif e.event == "done" and e.step:
            pending_begin.pop(e.step, None)
            todo.append(e)
    todo.extend(pending_begin.values())
    return sorted((e for e in todo if e.seq not in undone), key=lambda e: e.seq, reverse=True)


def last_plan(entries: list[Entry]) -> Optional[JSONObject]:
    """The plan (resolution + options) of the newest "run" entry in the current epoch."""
    for e in reversed(current_epoch(entries)):
        plan = e.data.get("plan")
        if e.event == "run" and isinstance(plan, dict):
            return dict(plan)
    return None


def step_states(entries: list[Entry]) -> dict[str, str]:
    """step id -> "done" | "interrupted" | "failed" | "undone" from the current epoch."""
    states: dict[str, str] = {}
    by_seq = {e.seq: e for e in entries}
    for e in current_epoch(entries):
        if e.step is None and e.event != "undone":
            continue
        if e.event == "begin":
            states[str(e.step)] = "interrupted"
        elif e.event == "done":
            states[str(e.step)] = "done"
        elif e.event == "failed":
            states[str(e.step)] = "failed"
        elif e.event == "undone":
            target = by_seq.get(integer(e.data, "seq") or -1)
            if target is not None and target.step:
                states[target.step] = "undone"
    return states


def unfinished_run(entries: list[Entry]) -> bool:
    """The newest run of the current epoch stopped before every step was in place (killed, or a
    step failed, verification included): what `envs` calls incomplete. A run journaled before
    runs were marked "ends": a step of it that began and never ended (or failed)."""
    epoch = current_epoch(entries)
    runs = [i for i, e in enumerate(epoch) if e.event == "run"]
    if not runs:
        return False
    after = epoch[runs[-1] + 1:]
    if epoch[runs[-1]].data.get("ends"):
        return not any(e.event == "finished" for e in after)
    begun: dict[str, int] = {}
    for e in after:
        if e.event == "begin" and e.step:
            begun[e.step] = begun.get(e.step, 0) + 1
        elif e.event == "done" and e.step and begun.get(e.step):
            begun[e.step] -= 1
        elif e.event == "failed":
            return True
    return not after or any(begun.values())
