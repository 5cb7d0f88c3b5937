"""The journal and the env lock on a really full filesystem (a filled tmpfs): exit 6 with
"no space left on <path>" first, the journal still whole records, and it goes on once space is freed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.full_disk import fill, tmpfs
from tfgpu_install.engine.env_lock import EnvLock
from tfgpu_install.env.journal import Journal
from tfgpu_install.errors import DiskFull, ExitCode


def test_a_journal_append_on_a_full_disk_leaves_whole_records_and_resumes(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "1m") as fs:
        journal = Journal(fs / "state" / "journal.jsonl")
        journal.append("run", env="/e", plan={"x": 1})
        filler = fill(fs)  # the journal's last page has room for part of the next record, not all of it
        with pytest.raises(DiskFull) as info:
            journal.append("begin", step="env.create", touches=["/e/" + "x" * 100] * 80, pre=[])
        err = info.value
        assert err.code == ExitCode.ENVIRONMENT == 6 and err.ref == "disk-full"
        assert err.message.startswith(f"no space left on {journal.path}; appending to the journal; ")
        assert "needed" in err.message and "free" in err.message and "run the same command again" in str(err.hint)
        lines = journal.path.read_bytes().split(b"\n")
        assert lines[-1] == b"" and [json.loads(ln)["event"] for ln in lines[:-1]] == ["run"]  # nothing torn
        filler.unlink()
        journal.append("begin", step="env.create", touches=["/e"], pre=[])
        assert [e.event for e in journal.entries()] == ["run", "begin"]


def test_the_lock_refuses_cleanly_when_its_pid_cannot_be_written(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "1m") as fs:
        lock_path = fs / "envs" / "e" / "lock"
        lock_path.parent.mkdir(parents=True)
        filler = fill(fs)
        with pytest.raises(DiskFull) as info:
            EnvLock(lock_path, Path("/e")).acquire()
        assert info.value.message.startswith(f"no space left on {lock_path}; writing the lock holder's PID")
        filler.unlink()
        with EnvLock(lock_path, Path("/e")) as held:  # not left locked by the failed attempt
            assert held.holder() is not None
