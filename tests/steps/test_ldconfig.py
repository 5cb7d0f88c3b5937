"""ldconfig.system with the real ldconfig against a temp root's ld.so.conf and cache."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.promised import absent
from tfgpu_install.context import Context, build_context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.errors import EnvironmentProblem, StepFailed
from tfgpu_install.files import tree_digest
from tfgpu_install.runner import ReplayRunner
from tfgpu_install.steps.ldconfig import SystemLdconfig, conf_name

pytestmark = pytest.mark.skipif(
    absent("gcc") or absent("ldconfig", "/sbin/ldconfig"),
    reason="needs gcc and ldconfig",
)

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"


def _root(ctx: Context) -> Path:
    """A temp /etc with ld.so.conf including ld.so.conf.d, and its cache built as a system would."""
    etc = ctx.sys_path("/etc")
    (etc / "ld.so.conf.d").mkdir(parents=True)
    (etc / "ld.so.conf").write_text(f"include {etc}/ld.so.conf.d/*.conf\n")
    subprocess.run([LDCONFIG, "-C", str(etc / "ld.so.cache"), "-f", str(etc / "ld.so.conf")], check=True)
    return etc


def _env_with_lib(tmp_path: Path) -> tuple[Path, Path]:
    env = tmp_path / "tf-env"
    lib = env / "lib" / "python3.11" / "site-packages" / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    src = tmp_path / "c.c"
    src.write_text("int cudnnGetVersion(void) { return 8907; }\n")
    so = lib / "libcudnn.so.8"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(so), str(src)], check=True)
    return env, so


def _listing(etc: Path) -> str:
    return subprocess.run(
        [LDCONFIG, "-p", "-C", str(etc / "ld.so.cache")], capture_output=True, text=True, check=True
    ).stdout


def test_registers_confirms_and_rolls_back(ctx: Context, tmp_path: Path) -> None:
    etc = _root(ctx)
    env, so = _env_with_lib(tmp_path)
    before = tree_digest(etc)
    step = SystemLdconfig(env)
    assert not step.check(ctx)
    ex = Executor(ctx, env)
    ex.run([step])
    conf = etc / "ld.so.conf.d" / conf_name(env)
    assert str(so.parent) in conf.read_text()
    assert f"=> {so}" in _listing(etc)
    assert step.check(ctx)
    assert [s.status for s in ex.run([SystemLdconfig(env)]).steps] == ["done"]

    ex.rollback([SystemLdconfig(env)])
    assert not conf.exists()
    assert str(so) not in _listing(etc)
    assert tree_digest(etc) == before  # the re-run ldconfig rebuilt the cache byte for byte


def test_kill_in_the_middle_then_rollback(tmp_env: dict[str, str], tmp_path: Path) -> None:
    """Conf written, ldconfig not yet run: rollback still removes the entry and refreshes the cache."""
    ctx = build_context(tmp_env)
    etc = _root(ctx)
    env, so = _env_with_lib(tmp_path)
    before = tree_digest(etc)
    ctx.hooks.fail_at = "ldconfig.system:middle:eio"
    ex = Executor(ctx, env)
    with pytest.raises(StepFailed):
        ex.run([SystemLdconfig(env)])
    assert (etc / "ld.so.conf.d" / conf_name(env)).exists()
    ctx.hooks.fail_at = None
    ex.rollback([SystemLdconfig(env)])
    assert tree_digest(etc) == before


def test_needs_root_on_the_real_system(
    tmp_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = ReplayRunner()
    ctx = build_context(dict(tmp_env, TFGPU_ROOT="/"), runner=runner)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    env, _ = _env_with_lib(tmp_path)
    with pytest.raises(EnvironmentProblem) as info:
        SystemLdconfig(env).apply(ctx)
    assert info.value.ref == "needs-root" and "sudo" in (info.value.hint or "")
    assert runner.calls == []  # refused before running anything
