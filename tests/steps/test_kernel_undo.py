"""#39 items 6 and 7: rollback of kernel.register never deletes the user's own kernel directory, and
the user's kernel dir is journaled absolute (a relative JUPYTER_DATA_DIR used to be journaled as
given: a rollback from another directory deleted an unrelated one there). The real executor and
journal; each attack beside its sane control."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tfgpu_install.app.kernel import user_kernels_dir
from tfgpu_install.context import Context, build_context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.steps.kernel import SPEC, RegisterKernel

THEIRS = '{"argv": ["python", "-m", "ipykernel_launcher"], "display_name": "my own", "language": "python"}'


def _register(ctx: Context, env: Path, kdir: Path) -> Executor:
    env.mkdir(parents=True, exist_ok=True)
    ex = Executor(ctx, env, plan={"p": 1})
    ex.run([RegisterKernel(env, kdir, "TF")])
    assert (kdir / SPEC).is_file()
    return ex


def test_rollback_leaves_the_users_kernel_made_after_kernel_remove(ctx: Context, tmp_path: Path) -> None:
    env, kdir = tmp_path / "env", tmp_path / "jupyter" / "kernels" / "tfgpu-env"
    ex = _register(ctx, env, kdir)
    shutil.rmtree(kdir)  # `kernel remove`, then the user's own kernel under that name
    kdir.mkdir()
    (kdir / SPEC).write_text(THEIRS)
    (kdir / "logo-64x64.png").write_bytes(b"png")
    ex.rollback([RegisterKernel(env, kdir, "TF")])
    assert (kdir / SPEC).read_text() == THEIRS and (kdir / "logo-64x64.png").exists()


def test_rollback_leaves_the_users_spec_put_into_our_dir(ctx: Context, tmp_path: Path) -> None:
    env, kdir = tmp_path / "env", tmp_path / "kernels" / "tfgpu-env"
    ex = _register(ctx, env, kdir)
    (kdir / SPEC).write_text(THEIRS)
    ex.rollback([RegisterKernel(env, kdir, "TF")])
    assert (kdir / SPEC).read_text() == THEIRS


def test_the_control_rollback_removes_the_kernel_it_made(ctx: Context, tmp_path: Path) -> None:
    env, kdir = tmp_path / "env", tmp_path / "kernels" / "tfgpu-env"
    ex = _register(ctx, env, kdir)
    (kdir / "logo-64x64.png").write_bytes(b"png")  # what Jupyter puts beside our spec goes with it
    ex.rollback([RegisterKernel(env, kdir, "TF")])
    assert not kdir.exists()


def test_a_relative_jupyter_data_dir_is_resolved_where_the_tool_runs(tmp_path: Path) -> None:
    from tests.conftest import make_tmp_env

    here = tmp_path / "here"
    here.mkdir()
    environ = {**make_tmp_env(tmp_path), "JUPYTER_DATA_DIR": "jup"}
    start = os.getcwd()
    try:
        os.chdir(here)
        got = user_kernels_dir(build_context(environ))
    finally:
        os.chdir(start)
    assert got == here / "jup" / "kernels" and got.is_absolute()
    ctx = build_context({**environ, "XDG_DATA_HOME": "relative", "JUPYTER_DATA_DIR": ""})
    assert user_kernels_dir(ctx) == Path(environ["HOME"]) / ".local" / "share" / "jupyter" / "kernels"


def test_rollback_from_another_directory_deletes_nothing_there(tmp_path: Path) -> None:
    """The attack end to end, through the CLI's journal and rollback in two processes: the kernel is
    registered with JUPYTER_DATA_DIR=jup from directory A; rollback runs from directory B, which has
    its own jup/kernels/<name>. B's stays; A's goes."""
    from tests.conftest import make_tmp_env

    environ = make_tmp_env(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    decoy = b / "jup" / "kernels" / "tfgpu-env"
    decoy.mkdir(parents=True)
    (decoy / SPEC).write_text(THEIRS)
    a.mkdir()
    env = tmp_path / "env"
    script = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from tfgpu_install.app.kernel import user_kernels_dir\n"
        "from tfgpu_install.context import build_context\n"
        "from tfgpu_install.engine.executor import Executor\n"
        "from tfgpu_install.app.rollback import journal_steps\n"
        "from tfgpu_install.steps.kernel import RegisterKernel\n"
        "ctx = build_context()\n"
        "env = Path(sys.argv[2])\n"
        "step = RegisterKernel(env, user_kernels_dir(ctx) / 'tfgpu-env', 'TF')\n"
        "plan = {'kernel': step.to_plan()}\n"
        "ex = Executor(ctx, env, plan=plan)\n"
        "if sys.argv[1] == 'install':\n"
        "    env.mkdir(exist_ok=True); ex.run([step])\n"
        "else:\n"
        "    recorded = [e for e in ex.journal.entries() if e.event == 'run'][-1].data['plan']['kernel']\n"
        "    ex.rollback([RegisterKernel.from_plan(recorded)])\n"
    )
    run_env = {**environ, "JUPYTER_DATA_DIR": "jup", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for where, verb in ((a, "install"), (b, "rollback")):
        done = subprocess.run([sys.executable, "-c", script, verb, str(env)], cwd=where, env=run_env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        if verb == "install":
            assert (a / "jup" / "kernels" / "tfgpu-env" / SPEC).is_file()
            journal = next(Path(environ["TFGPU_STATE_DIR"]).glob("envs/*/journal.jsonl")).read_text()
            assert json.dumps(str(a / "jup" / "kernels" / "tfgpu-env")) in journal  # journaled absolute
    assert (decoy / SPEC).read_text() == THEIRS
    assert not (a / "jup" / "kernels" / "tfgpu-env").exists()


@pytest.mark.parametrize("relative", ["jup/kernels/tfgpu-env"])
def test_a_relative_path_in_an_old_journal_is_never_acted_on(ctx: Context, tmp_path: Path, relative: str) -> None:
    decoy = tmp_path / relative
    decoy.mkdir(parents=True)
    (decoy / SPEC).write_text(THEIRS)
    start = os.getcwd()
    try:
        os.chdir(tmp_path)
        RegisterKernel(tmp_path / "env", Path(relative), "TF").undo(ctx, {"kernel_dir": relative, "created": True})
    finally:
        os.chdir(start)
    assert (decoy / SPEC).read_text() == THEIRS
