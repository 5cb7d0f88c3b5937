"""resolve_machine and --python PATH: the interpreter given is asked its version beside the
probe (once per binary), and used as it says when the probe found it nowhere else."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tfgpu_install.app.resolution import ResolveRequest, resolve_machine
from tfgpu_install.context import Context, build_context
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.facts.model import AssumeFlags
from tfgpu_install.facts.python import ASKED_FILE
from tfgpu_install.runner import SubprocessRunner

REAL_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
EXPECTED = "%d.%d.%d" % sys.version_info[:3]
MACHINE = AssumeFlags(driver="550.54.14", gpus=("8.6",))  # the GPU side assumed; Python probed for real


def _runs_for(ctx: Context, path: Path) -> int:
    assert isinstance(ctx.runner, SubprocessRunner)
    return sum(1 for argv in ctx.runner.log if argv[:2] == (str(path), "-c") and "version_info" in argv[2])


def _copy_of_python(tmp_path: Path) -> Path:
    """An interpreter binary in a dir no probe looks in (a copy: its own inode, its own realpath)."""
    where = tmp_path / "opt" / "bin"
    where.mkdir(parents=True)
    copy = where / "python-custom"
    shutil.copy2(REAL_PYTHON, copy)
    return copy


def test_an_interpreter_found_nowhere_else_is_used_as_it_says(tmp_env: dict[str, str], tmp_path: Path) -> None:
    copy = _copy_of_python(tmp_path)
    ctx = build_context(tmp_env)
    resolved = resolve_machine(ctx, ResolveRequest(assume=MACHINE, python=str(copy), allow_cpu=True))
    assert resolved.explicit_python == str(copy)
    assert [(p.path, p.version, p.source) for p in resolved.facts.pythons] == [(str(copy), EXPECTED, "--python")]
    assert _runs_for(ctx, copy) == 1
    assert str(copy) in (ctx.cache_dir / ASKED_FILE).read_text()  # env.create's own ask is then a lookup
    again = build_context(tmp_env)
    resolve_machine(again, ResolveRequest(assume=MACHINE, python=str(copy), allow_cpu=True))
    assert _runs_for(again, copy) == 0


def test_an_interpreter_the_probe_found_keeps_the_probe_s_entry(tmp_env: dict[str, str], tmp_path: Path) -> None:
    link_dir = tmp_path / "bin"
    link_dir.mkdir()
    (link_dir / "python3").symlink_to(REAL_PYTHON)
    env = {**tmp_env, "PATH": f"{link_dir}{os.pathsep}{tmp_env['PATH']}"}
    resolved = resolve_machine(build_context(env), ResolveRequest(assume=MACHINE, python=REAL_PYTHON, allow_cpu=True))
    assert resolved.facts.pythons and all(os.path.realpath(p.path) == REAL_PYTHON for p in resolved.facts.pythons)
    assert all(p.source != "--python" for p in resolved.facts.pythons)


def test_assumed_python_is_not_replaced_by_the_interpreter_s_answer(tmp_env: dict[str, str], tmp_path: Path) -> None:
    copy = _copy_of_python(tmp_path)
    assume = AssumeFlags(driver="550.54.14", gpus=("8.6",), python="3.10")
    resolved = resolve_machine(build_context(tmp_env), ResolveRequest(assume=assume, python=str(copy), allow_cpu=True))
    assert [p.version for p in resolved.facts.pythons] == ["3.10"]


def test_a_path_that_is_no_interpreter_is_refused_before_the_probe(tmp_env: dict[str, str], tmp_path: Path) -> None:
    ctx = build_context(tmp_env)
    with pytest.raises(EnvironmentProblem, match="does not exist or is not executable"):
        resolve_machine(ctx, ResolveRequest(assume=MACHINE, python=str(tmp_path / "nope" / "python3")))
    assert isinstance(ctx.runner, SubprocessRunner) and ctx.runner.log == []  # nothing was run
