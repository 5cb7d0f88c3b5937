"""The journal: append-only, fsynced JSON lines, torn tails tolerated, open entries computed."""

from __future__ import annotations

import json
from pathlib import Path

from tfgpu_install.env.journal import Journal, last_plan, open_entries, step_states
from tfgpu_install.env.state import env_key


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


def test_known_envs_newest_first_each_once(tmp_path: Path) -> None:
    import os

    from tfgpu_install.context import build_context
    from tfgpu_install.env.state import known_envs

    ctx = build_context({"HOME": str(tmp_path), "TFGPU_STATE_DIR": str(tmp_path / "state")})
    a, b = ctx.state_dir / "envs" / "a-1", ctx.state_dir / "envs" / "b-2"
    for d in (a, b):
        d.mkdir(parents=True)
    (a / "journal.jsonl").write_text('{"torn\n{"event": "run", "env": "/envs/a"}\n')
    (b / "journal.jsonl").write_text('{"event": "run", "env": "/envs/b"}\n')
    (a / "verify.json").write_text('{"env": "/envs/a"}')
    for f, t in ((a / "journal.jsonl", 100), (b / "journal.jsonl", 200), (a / "verify.json", 300)):
        os.utime(f, (t, t))
    assert known_envs(ctx) == [Path("/envs/a"), Path("/envs/b")]  # a's newest file is its verify.json
    os.utime(b / "journal.jsonl", (400, 400))
    assert known_envs(ctx) == [Path("/envs/b"), Path("/envs/a")]
