"""asked_version: an interpreter binary is run once for its version; scripts are always asked."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tfgpu_install.context import Context, build_context
from tfgpu_install.facts.python import ASKED_FILE, asked_version
from tfgpu_install.runner import SubprocessRunner

REAL_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
EXPECTED = "%d.%d.%d" % sys.version_info[:3]


def _ctx(tmp_env: dict[str, str]) -> tuple[Context, SubprocessRunner]:
    ctx = build_context(tmp_env)
    assert isinstance(ctx.runner, SubprocessRunner)
    return ctx, ctx.runner


def _version_runs(runner: SubprocessRunner) -> int:
    return sum(1 for argv in runner.log if argv[1:2] == ("-c",) and "version_info" in argv[2])


def test_a_binary_is_asked_once_then_answered_from_the_cache(tmp_env: dict[str, str], tmp_path: Path) -> None:
    link = tmp_path / "python3"
    link.symlink_to(REAL_PYTHON)
    ctx, runner = _ctx(tmp_env)
    assert asked_version(ctx, str(link)) == EXPECTED
    assert _version_runs(runner) == 1
    assert (ctx.cache_dir / ASKED_FILE).is_file()
    again, runner2 = _ctx(tmp_env)  # a new run: the cache file, not memory
    assert asked_version(again, str(link)) == EXPECTED
    assert asked_version(again, REAL_PYTHON) == EXPECTED  # the same binary by another name
    assert _version_runs(runner2) == 0


def test_a_replaced_binary_is_asked_again(tmp_env: dict[str, str], tmp_path: Path) -> None:
    copy = tmp_path / "python3.x"
    shutil.copy2(REAL_PYTHON, copy)
    ctx, runner = _ctx(tmp_env)
    assert asked_version(ctx, str(copy)) == EXPECTED
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # rebuilt in place
    assert asked_version(ctx, str(copy)) == EXPECTED
    assert _version_runs(runner) == 2


def test_a_wrapper_script_is_never_remembered(tmp_env: dict[str, str], tmp_path: Path) -> None:
    # A pyenv shim answers for whatever its environment selects: its file says nothing.
    shim = tmp_path / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{REAL_PYTHON}" "$@"\n')
    shim.chmod(0o755)
    ctx, runner = _ctx(tmp_env)
    assert asked_version(ctx, str(shim)) == EXPECTED
    assert asked_version(ctx, str(shim)) == EXPECTED
    assert _version_runs(runner) == 2
    assert not (ctx.cache_dir / ASKED_FILE).exists()


def test_a_damaged_or_lying_cache_is_not_believed(tmp_env: dict[str, str], tmp_path: Path) -> None:
    ctx, runner = _ctx(tmp_env)
    store = ctx.cache_dir / ASKED_FILE
    store.parent.mkdir(parents=True, exist_ok=True)
    for junk in ("{not json", "[1, 2]", '{"x": 3}'):
        store.write_text(junk)
        assert asked_version(ctx, REAL_PYTHON) == EXPECTED
        store.write_text(junk)
    assert _version_runs(runner) == 3
    # A stored answer that is not a version is asked again and replaced.
    doc = store.read_text()
    store.write_text(doc.replace(EXPECTED, "three point eleven"))
    assert asked_version(ctx, REAL_PYTHON) == EXPECTED
    assert _version_runs(runner) == 4


def test_a_program_that_is_not_python_gives_none_and_nothing_is_kept(tmp_env: dict[str, str]) -> None:
    ctx, _ = _ctx(tmp_env)
    assert asked_version(ctx, "/bin/true") is None  # an ELF file that prints nothing
    assert asked_version(ctx, "/nonexistent/python3") is None
    assert not (ctx.cache_dir / ASKED_FILE).exists()
