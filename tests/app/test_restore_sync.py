"""packages.sync on a real venv: extras moved out (files from RECORD), undo puts them back
byte-identical without an index, and a sync interrupted mid-apply is undone from its plan."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.support.wheelhouse import WheelSpec, build_wheel
from tfgpu_install.context import Context
from tfgpu_install.env.target import TargetEnv
from tfgpu_install.files import tree_digest
from tfgpu_install.steps.packages import installed_versions
from tfgpu_install.steps.sync import SyncPackages


@pytest.fixture
def env(tmp_path: Path) -> TargetEnv:
    path = tmp_path / "env"
    venv.create(path, with_pip=False)
    wheels = [
        build_wheel(WheelSpec("keep-me", "1.0", {"keep_me/__init__.py": b"A = 1\n"}), tmp_path / "w"),
        build_wheel(WheelSpec("extra-one", "2.0", {"extra_one/__init__.py": b"B = 2\n", "extra_one/sub/x.py": b""}),
                    tmp_path / "w"),
        build_wheel(WheelSpec("extra-two", "3.0", {"extra_two.py": b"C = 3\n"}), tmp_path / "w"),
    ]
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(path / "bin" / "python"),
                    "--no-index", *map(str, wheels)], check=True, capture_output=True)
    # Byte-compile, as a used env would be: the stale .pyc files must go with their modules.
    subprocess.run([str(path / "bin" / "python"), "-c", "import keep_me, extra_one, extra_two"], check=True)
    return TargetEnv.at(path)


def test_sync_removes_extras_and_undo_restores_them(ctx: Context, env: TargetEnv) -> None:
    before = tree_digest(env.path)
    step = SyncPackages(env, ["keep-me"])
    assert not step.check(ctx)
    record = step.apply(ctx)
    assert set(installed_versions(env)) == {"keep-me"}
    assert record["removed"] == ["extra-one==2.0", "extra-two==3.0"]
    sp = env.site_packages()
    assert not (sp / "extra_one").exists() and not (sp / "extra_two.py").exists()
    assert not list(sp.glob("__pycache__/extra_two*"))
    assert step.check(ctx)
    step.undo(ctx, record)
    after = tree_digest(env.path)
    # Everything back byte-identical (empty __pycache__ dirs aside).
    assert {k: v for k, v in after.items() if "__pycache__" not in k} == \
           {k: v for k, v in before.items() if "__pycache__" not in k}
    assert set(installed_versions(env)) == {"keep-me", "extra-one", "extra-two"}


def test_interrupted_sync_is_undone_through_the_journal(ctx: Context, env: TargetEnv) -> None:
    """Through the executor, as a restore runs it: its pre-state handling must not take away
    the plan the step's undo needs."""
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.errors import TfgpuError

    before = {k: v for k, v in tree_digest(env.path).items() if "__pycache__" not in k}
    step = SyncPackages(env, ["keep-me"])
    ex = Executor(ctx, env.path)
    ctx.hooks.fail_at = "packages.sync:middle:eio"
    with pytest.raises(TfgpuError):
        ex.run([step])
    ctx.hooks.fail_at = None
    assert not step.check(ctx)  # a plan on disk means "not done"
    ex.rollback([step])
    assert set(installed_versions(env)) == {"keep-me", "extra-one", "extra-two"}
    assert {k: v for k, v in tree_digest(env.path).items() if "__pycache__" not in k} == before
