"""The journal: append-only, fsynced JSON lines, torn tails tolerated, open entries computed."""

from __future__ import annotations

import json
from pathlib import Path

from installer.engine.journal import Journal, env_key, last_plan, open_entries, step_states


def test_append_and_read_back(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j" / "journal.jsonl")
    j.append("run", env="/e", plan={"profile": "stable"})
    j.append("begin", step="env.create", touches=["/e"])
    j.append("done", step="env.create", undo={"created": True})
    lines = (tmp_path / "j" / "journal.jsonl").read_text().splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["run", "begin", "done"]
    assert all("ts" in json.loads(x) for x in lines)
    assert last_plan(j.entries()) == {"profile": "stable"}


def test_torn_last_line_is_skipped_and_healed(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    j.append("begin", step="a")
    with open(path, "a") as fh:
        fh.write('{"event": "done", "st')  # a kill mid-write
    assert [e.event for e in j.entries()] == ["begin"]
    j.append("done", step="a", undo={})
    assert [e.event for e in j.entries()] == ["begin", "done"]
    assert path.read_text().count("\n") == 3  # the torn line was ended, not glued to the next


def test_open_entries_newest_first_with_interrupted_begin(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    j.append("begin", step="a")
    j.append("done", step="a", undo={"n": 1})
    j.append("begin", step="b")
    j.append("done", step="b", undo={"n": 2})
    j.append("begin", step="c")  # killed here
    todo = open_entries(j.entries())
    assert [(e.step, e.event) for e in todo] == [("c", "begin"), ("b", "done"), ("a", "done")]
    assert step_states(j.entries()) == {"a": "done", "b": "done", "c": "interrupted"}
    j.append("undone", step="c", seq=todo[0].seq)
    assert [e.step for e in open_entries(j.entries())] == ["b", "a"]
    j.append("rolled-back")
    assert open_entries(j.entries()) == []
    assert step_states(j.entries()) == {}


def test_env_key_is_stable_and_distinct() -> None:
    assert env_key(Path("/a/tf-env")) == env_key(Path("/a/tf-env"))
    assert env_key(Path("/a/tf-env")) != env_key(Path("/b/tf-env"))
    assert env_key(Path("/a/tf env!")).startswith("tf_env_-")


def test_a_record_written_without_fsync_is_still_a_whole_line(tmp_path: Path) -> None:
    """durable=False skips only the fsync: the line, its torn-tail healing and reading are the same."""
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    j.append("begin", step="a")
    path.write_bytes(path.read_bytes() + b'{"event": "do')  # a kill mid-write
    j.append("done", durable=False, step="a", seconds=0.25)
    j.append("begin", step="b")
    events = [(e.event, e.step) for e in j.entries()]
    assert events == [("begin", "a"), ("done", "a"), ("begin", "b")]
    assert [e.data.get("seconds") for e in j.entries()] == [None, 0.25, None]
