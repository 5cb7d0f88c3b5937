"""Prefetch: the modules later steps name are imported on a thread of their own once a run
starts applying; a module that fails to import does not fail the run; a dry run imports nothing."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from tests.support.engine import CreateTree
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.engine.prefetch import start

RECORDER = "import threading\nTHREAD = threading.current_thread().name\n"


def _modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str, broken: str = "") -> None:
    for name in names:
        (tmp_path / f"{name}.py").write_text(RECORDER)
    if broken:
        (tmp_path / f"{broken}.py").write_text("raise RuntimeError('a broken module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in (*names, broken):
        monkeypatch.delitem(sys.modules, name, raising=False)


class Later(CreateTree):
    prefetch = ("tfgpu_pf_later", "tfgpu_pf_broken", "tfgpu_pf_later")


def test_a_run_imports_what_later_steps_name_on_its_own_thread(
        ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mods").mkdir()
    _modules(tmp_path / "mods", monkeypatch, "tfgpu_pf_later", broken="tfgpu_pf_broken")
    steps = [CreateTree("a.make", tmp_path / "a"), Later("b.make", tmp_path / "b")]
    Executor(ctx, tmp_path / "env").run(steps, dry_run=True)
    assert "tfgpu_pf_later" not in sys.modules  # a dry run applies nothing, so warms nothing
    before = {t.ident for t in threading.enumerate()}
    report = Executor(ctx, tmp_path / "env").run(steps)
    assert [s.status for s in report.steps] == ["applied", "applied"]
    for t in threading.enumerate():
        if t.name == "prefetch" and t.ident not in before:
            t.join(30)
    assert sys.modules["tfgpu_pf_later"].THREAD == "prefetch"
    assert "tfgpu_pf_broken" not in sys.modules


def test_start_skips_what_is_imported_already(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m").mkdir()
    _modules(tmp_path / "m", monkeypatch, "tfgpu_pf_one")
    assert start(["json", "os"]) is None  # nothing to do: no thread
    thread = start(["json", "tfgpu_pf_one"])
    assert thread is not None
    thread.join(30)
    assert sys.modules["tfgpu_pf_one"].THREAD == "prefetch"

