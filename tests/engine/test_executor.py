"""The executor on real files: journal before acting, resume, fingerprint skip, dry run, rollback."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Mapping, Optional

import pytest

from tests.support.engine import CountingCheck, WriteFile, demo_steps
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.env.fingerprint import env_fingerprint
from tfgpu_install.env.journal import Journal
from tfgpu_install.errors import EnvironmentProblem, LockedError, StepFailed
from tfgpu_install.files import tree_digest
from tfgpu_install.runner import ReplayRunner
from tfgpu_install.steps.base import Step, UndoRecord


def _seed(root: Path) -> None:
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "home" / ".bashrc").write_text("alias ll='ls -l'\n")
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True, exist_ok=True)


def test_install_then_noop_then_rollback(ctx: Context, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _seed(root)
    before = tree_digest(root)
    ex = Executor(ctx, root / "env", plan={"p": 1})
    rep = ex.run(demo_steps(root))
    assert [s.status for s in rep.steps] == ["applied"] * 4
    assert (root / "env" / "pkgs.txt").read_text().startswith("tensorflow==")
    assert "LD_LIBRARY_PATH" in (root / "home" / ".bashrc").read_text()

    # The journal holds begin before done for every step, and the plan; then that the run ended
    # (`envs` tells a killed run from one that ended by it: #38 item 3).
    events = [(e.event, e.step) for e in ex.journal.entries()]
    assert events[0] == ("run", None)
    assert events[1:-1] == [(ev, s.id) for s in demo_steps(root) for ev in ("begin", "done")]
    assert events[-1] == ("finished", None)

    # A re-run touches nothing: no journal line, the tree unchanged.
    after = tree_digest(root)
    jlen = len(ex.journal.entries())
    rep2 = ex.run(demo_steps(root))
    assert [s.status for s in rep2.steps] == ["done"] * 4 and not rep2.changed
    assert tree_digest(root) == after and len(ex.journal.entries()) == jlen

    undo = ex.rollback(demo_steps(root))
    assert [s.id for s in undo.steps] == [s.id for s in reversed(demo_steps(root))]
    assert tree_digest(root) == before
    # A second rollback has nothing left to do.
    assert ex.rollback(demo_steps(root)).steps == []


def test_fingerprinted_step_skipped_until_env_changes(ctx: Context, tmp_path: Path) -> None:
    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    sp.mkdir(parents=True)
    (sp / "numpy-1.26.4.dist-info").mkdir()
    log = tmp_path / "verify.log"
    steps = [CountingCheck("verify.run", log)]
    ex = Executor(ctx, env)
    ex.run(steps)
    assert ex.run(steps).steps[0].status == "unchanged"
    assert log.read_text().count("ran") == 1
    fp = env_fingerprint(env)
    (sp / "numpy-2.0.0.dist-info").mkdir()  # someone upgraded numpy: verify again
    assert env_fingerprint(env) != fp
    assert ex.run(steps).steps[0].status == "applied"
    assert log.read_text().count("ran") == 2


def test_dry_run_changes_nothing_and_runs_no_mutating_command(tmp_env: dict[str, str], tmp_path: Path) -> None:
    from tfgpu_install.context import build_context

    runner = ReplayRunner()
    ctx = build_context(tmp_env, runner=runner)
    root = tmp_path / "t"
    _seed(root)
    before = tree_digest(tmp_path)
    rep = Executor(ctx, root / "env").run(demo_steps(root), dry_run=True)
    assert [s.status for s in rep.steps] == ["pending"] * 4
    assert runner.mutating_calls == []
    assert tree_digest(tmp_path) == before  # not even a journal or lock file


def test_resume_after_failure_finishes_the_job(ctx: Context, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _seed(root)
    ctx.hooks.fail_at = "packages.install:middle:eio"
    ex = Executor(ctx, root / "env")
    with pytest.raises(StepFailed):
        ex.run(demo_steps(root))
    states = [e.event for e in ex.journal.entries()]
    assert states[-2:] == ["begin", "failed"]
    ctx.hooks.fail_at = None
    rep = ex.run(demo_steps(root))
    assert [s.status for s in rep.steps] == ["done", "applied", "applied", "applied"]


def test_disk_full_is_one_clear_error_and_rollback_restores(ctx: Context, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _seed(root)
    before = tree_digest(root)
    ctx.hooks.fail_at = "packages.install:middle:enospc"
    ex = Executor(ctx, root / "env")
    with pytest.raises(EnvironmentProblem) as info:
        ex.run(demo_steps(root))
    assert info.value.ref == "disk-full" and "packages.install" in info.value.message
    assert "resume" in (info.value.hint or "")
    ctx.hooks.fail_at = None
    ex.rollback(demo_steps(root))
    assert tree_digest(root) == before


class _RealDevFull(Step):
    """Writes to /dev/full: the kernel's own ENOSPC."""

    id = "devfull.write"

    def describe(self) -> str:
        return "write to /dev/full"

    def check(self, ctx: Context) -> bool:
        return False

    def apply(self, ctx: Context) -> UndoRecord:
        with open("/dev/full", "wb") as fh:
            fh.write(b"x" * 10)
            fh.flush()
        return {}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        return None


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_real_enospc_from_dev_full(ctx: Context, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as info:
        Executor(ctx, tmp_path / "env").run([_RealDevFull()])
    assert info.value.ref == "disk-full"
    assert info.value.__cause__ is not None and getattr(info.value.__cause__, "errno", None) == errno.ENOSPC


def test_rollback_after_partial_uses_pre_state(ctx: Context, tmp_path: Path) -> None:
    """A step that changed a file then failed without an undo record: the backup restores it."""
    target = tmp_path / "config.txt"
    target.write_text("original\n")
    ctx.hooks.fail_at = "cfg.write:middle:eio"
    ex = Executor(ctx, tmp_path / "env")
    with pytest.raises(StepFailed):
        ex.run([WriteFile("cfg.write", target, "new content here\n")])
    assert target.read_text() != "original\n"  # half-written by the step
    ex.rollback([WriteFile("cfg.write", target, "new content here\n")])
    assert target.read_text() == "original\n"


def test_second_holder_refused_with_pid(ctx: Context, tmp_path: Path) -> None:
    import os

    ex = Executor(ctx, tmp_path / "env")
    with ex.lock():
        with pytest.raises(LockedError) as info:
            Executor(ctx, tmp_path / "env").lock().acquire()
    assert f"PID {os.getpid()}" in info.value.message and "--wait" in (info.value.hint or "")
    # Released: it can be taken again.
    with Executor(ctx, tmp_path / "env").lock():
        pass


def test_journal_lines_are_json_with_touches(ctx: Context, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _seed(root)
    ex = Executor(ctx, root / "env")
    ex.run(demo_steps(root))
    begins = [json.loads(x) for x in Journal(ex.journal.path).path.read_text().splitlines()]
    begin = next(b for b in begins if b["event"] == "begin" and b["step"] == "activation.write")
    assert begin["touches"] == [str(root / "home" / ".bashrc")]
    assert begin["pre"][0]["kind"] == "file" and len(begin["pre"][0]["sha256"]) == 64
    # each "done" says how long its step took (the bench subtracts verify.run's; `durable` is no field)
    done = [b for b in begins if b["event"] == "done"]
    assert done and all(isinstance(d["seconds"], float) and d["seconds"] >= 0 for d in done)
    assert not any("durable" in b for b in begins)


def test_rollback_removes_directories_created_on_the_way(ctx: Context, tmp_path: Path) -> None:
    data = tmp_path / "data"
    before = tree_digest(data)
    deep = data / "envs" / "x" / "f.txt"
    ex = Executor(ctx, tmp_path / "env")
    ex.run([WriteFile("deep.write", deep, "content\n")])
    assert deep.exists()
    ex.rollback([WriteFile("deep.write", deep, "content\n")])
    assert tree_digest(data) == before  # data/envs and data/envs/x were ours: gone

    (data / "envs" / "x").mkdir(parents=True)
    ex.run([WriteFile("deep.write", deep, "content\n")])
    (data / "envs" / "keep.txt").write_text("a user's file\n")
    ex.rollback([WriteFile("deep.write", deep, "content\n")])
    assert (data / "envs" / "keep.txt").exists() and (data / "envs" / "x").is_dir()  # existed before: kept


# --- results travel by value, as arguments (#36 item 3) -------------------------------------


class _Says(Step):
    """Returns a record saying what it was handed: `needs` names the earlier steps it reads."""

    def __init__(self, step_id: str, needs: tuple[str, ...] = (), out: Optional[Path] = None) -> None:
        self.id, self.needs, self.out = step_id, needs, out

    def describe(self) -> str:
        return self.id

    def check(self, ctx: Context) -> bool:
        return False

    def apply(self, ctx: Context) -> UndoRecord:
        return self.apply_with(ctx, {})

    def apply_with(self, ctx: Context, earlier: Mapping[str, UndoRecord]) -> UndoRecord:
        if self.out is not None:  # only the step under test writes, and only under tmp_path
            self.out.write_text(json.dumps(dict(earlier), sort_keys=True))
        return {"made_by": self.id}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        pass


def test_a_step_gets_the_earlier_records_it_names_and_no_others(ctx: Context, tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    steps = [_Says("a.first"), _Says("b.second"), _Says("c.third", needs=("a.first", "z.never"), out=out)]
    Executor(ctx, tmp_path / "env").run(steps)
    assert json.loads(out.read_text()) == {"a.first": {"made_by": "a.first"}}  # b's not named; z never ran


def test_the_context_carries_no_results() -> None:
    from dataclasses import fields

    assert not {f.name for f in fields(Context)} & {"results", "facts"}
