"""Activation on a real venv: the blocks work in a real shell, the launcher works without
activation (as under sudo/cron), undo gives back the original bytes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.promised import absent, needs_tool
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.errors import BadInputError
from tfgpu_install.files import tree_digest
from tfgpu_install.steps.activation import LAUNCHER, WriteActivation
from tfgpu_install.steps.shell_rc import WriteShellRc

FAKE_CUDNN = "int cudnnGetVersion(void) { return 8907; }\n"


def _venv_with_libs(tmp_path: Path) -> Path:
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    sp = next(env.glob("lib/python*/site-packages"))
    lib = sp / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    src = tmp_path / "cudnn.c"
    src.write_text(FAKE_CUDNN)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(lib / "libcudnn.so.8"), str(src)],
        check=True,
    )
    (sp / "nvidia" / "cuda_nvcc" / "bin").mkdir(parents=True)
    ptxas = sp / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
    ptxas.write_text("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n")
    ptxas.chmod(0o755)
    return env


def _bash(script: str, env_vars: dict[str, str]) -> str:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script], env=env_vars, capture_output=True, text=True, check=True
    ).stdout


pytestmark = pytest.mark.skipif(absent("gcc"), reason="needs gcc")


def test_activate_sets_and_deactivate_restores(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    step = WriteActivation(env)
    assert not step.check(ctx)
    Executor(ctx, env).run([step])
    assert step.check(ctx)
    lib = next(env.glob("lib/python*/site-packages/nvidia/cudnn/lib"))
    out = _bash(
        f". {env}/bin/activate; echo \"A=$LD_LIBRARY_PATH\"; command -v ptxas;"
        f" python -c 'import ctypes; print(ctypes.CDLL(\"libcudnn.so.8\").cudnnGetVersion())';"
        " deactivate; echo \"D=${LD_LIBRARY_PATH-unset}\"",
        {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/keep"},
    )
    lines = out.splitlines()
    assert lines[0] == f"A={lib}:/opt/keep"
    assert lines[1].endswith("nvidia/cuda_nvcc/bin/ptxas")
    assert lines[2] == "8907"  # loaded by soname through LD_LIBRARY_PATH
    assert lines[3] == "D=/opt/keep"
    # Unset before: unset after.
    out = _bash(f". {env}/bin/activate; deactivate; echo \"D=${{LD_LIBRARY_PATH-unset}}\"", {"PATH": "/usr/bin:/bin"})
    assert out.strip() == "D=unset"


def test_launcher_works_with_an_empty_environment(ctx: Context, tmp_path: Path) -> None:
    """As under sudo or cron: no activation, LD_LIBRARY_PATH stripped."""
    env = _venv_with_libs(tmp_path)
    Executor(ctx, env).run([WriteActivation(env)])
    run = env / "bin" / LAUNCHER
    out = subprocess.run(
        ["/usr/bin/env", "-i", str(run), "python", "-c",
         "import ctypes,sys; print(sys.prefix); print(ctypes.CDLL('libcudnn.so.8').cudnnGetVersion())"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert out == [str(env), "8907"]
    bare = subprocess.run([str(run)], capture_output=True, text=True)
    assert bare.returncode == 2 and "usage" in bare.stderr


def test_rerun_is_noop_and_undo_is_byte_identical(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    act = env / "bin" / "activate"
    act.write_text(act.read_text() + "# a user's own line\n")  # outside our marks: kept
    before = tree_digest(env)
    ex = Executor(ctx, env)
    ex.run([WriteActivation(env)])
    text = act.read_text()
    assert text.count(">>> tfgpu-install >>>") == 1 and text.count(">>> tfgpu-install deactivate >>>") == 1
    assert "# a user's own line\n" in text
    assert [s.status for s in ex.run([WriteActivation(env)]).steps] == ["done"]
    assert act.read_text() == text
    ex.rollback([WriteActivation(env)])
    assert tree_digest(env) == before


def test_new_library_dir_makes_check_fail_and_rewrites_block(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    ex = Executor(ctx, env)
    ex.run([WriteActivation(env)])
    new = next(env.glob("lib/python*/site-packages")) / "nvidia" / "cublas" / "lib"
    new.mkdir(parents=True)
    assert not WriteActivation(env).check(ctx)
    ex.run([WriteActivation(env)])
    assert str(new) in (env / "bin" / "activate").read_text()
    assert (env / "bin" / "activate").read_text().count(">>> tfgpu-install >>>") == 1


def test_conda_layout_scripts(ctx: Context, tmp_path: Path) -> None:
    prefix = tmp_path / "conda-env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    lib = prefix / "lib" / "python3.11" / "site-packages" / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    before = tree_digest(prefix)
    ex = Executor(ctx, prefix)
    ex.run([WriteActivation(prefix, backend="conda")])
    act = prefix / "etc/conda/activate.d/tfgpu-install.sh"
    deact = prefix / "etc/conda/deactivate.d/tfgpu-install.sh"
    out = _bash(f". {act}; echo \"A=$LD_LIBRARY_PATH\"; . {deact}; echo \"D=${{LD_LIBRARY_PATH-unset}}\"",
                {"PATH": "/usr/bin:/bin"})
    assert out.splitlines() == [f"A={lib}", "D=unset"]
    assert "CONDA_PREFIX=" in (prefix / "bin" / LAUNCHER).read_text()
    ex.rollback([WriteActivation(prefix, backend="conda")])
    # etc/conda/... dirs may stay (conda itself creates them); every file is gone.
    assert {k: v for k, v in tree_digest(prefix).items() if not k.startswith("etc")} == before


def test_shell_rc_block(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    Executor(ctx, env).run([WriteActivation(env)])
    rc = tmp_path / "home" / ".bashrc"
    rc.parent.mkdir(exist_ok=True)
    rc.write_text("export EDITOR=vi")  # no final newline: still restored exactly
    ex = Executor(ctx, env)
    ex.run([WriteShellRc(rc, env)])
    out = _bash(f". {rc}; echo \"V=$VIRTUAL_ENV\"", {"PATH": "/usr/bin:/bin"})
    assert out.strip() == f"V={env}"
    assert WriteShellRc(rc, env).check(ctx)
    ex.rollback([WriteActivation(env), WriteShellRc(rc, env)])
    assert rc.read_text() == "export EDITOR=vi"
    fish = tmp_path / "config.fish"
    step = WriteShellRc(fish, env)
    Executor(ctx, env).run([step])
    assert "activate.fish" in fish.read_text()
    Executor(ctx, env).rollback([step])
    assert not fish.exists()  # it did not exist before


@needs_tool("fish", "the activation script is sourced in fish")
def test_fish_activation(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    Executor(ctx, env).run([WriteActivation(env)])
    lib = next(env.glob("lib/python*/site-packages/nvidia/cudnn/lib"))
    script = (f"source {env}/bin/activate.fish; echo A=(printenv LD_LIBRARY_PATH); command -v ptxas; deactivate;"
              " echo D=(printenv LD_LIBRARY_PATH)")
    out = subprocess.run(["fish", "--no-config", "-c", script], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LD_LIBRARY_PATH": "/opt/keep"},
                         check=True).stdout.splitlines()
    assert out[0] == f"A={lib}:/opt/keep"
    assert out[1].endswith("nvidia/cuda_nvcc/bin/ptxas")
    assert out[2] == "D=/opt/keep"


@needs_tool("tcsh", "the activation script is sourced in tcsh")
def test_csh_activation(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    Executor(ctx, env).run([WriteActivation(env)])
    lib = next(env.glob("lib/python*/site-packages/nvidia/cudnn/lib"))
    # `prompt` set: venv's own activate.csh reads it (a non-interactive tcsh has none).
    script = f"set prompt='> '; source {env}/bin/activate.csh; printenv LD_LIBRARY_PATH; which ptxas"
    out = subprocess.run(["tcsh", "-f", "-c", script],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                         check=True).stdout.splitlines()
    assert out[0] == str(lib)
    assert out[1].endswith("nvidia/cuda_nvcc/bin/ptxas")
    kept = subprocess.run(["tcsh", "-f", "-c", script], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LD_LIBRARY_PATH": "/opt/keep"})
    assert kept.stdout.splitlines()[0] == f"{lib}:/opt/keep"


# --- the activate scripts share the rc's block code, and its guarantees ----------------------


def test_reinstall_rollback_restores_the_previous_block(ctx: Context, tmp_path: Path) -> None:
    """Two runs, the second rewriting the block: undoing it gives back the first run's block."""
    env = _venv_with_libs(tmp_path)
    act = env / "bin" / "activate"
    pristine = tree_digest(env)
    ex = Executor(ctx, env)
    ex.run([WriteActivation(env)])
    first = act.read_bytes()
    (next(env.glob("lib/python*/site-packages")) / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    ex.run([WriteActivation(env)])
    assert act.read_bytes() != first
    entries = [e for e in ex.journal.entries() if e.event == "done"]
    ex.rollback([WriteActivation(env)], to_seq=entries[0].seq)
    assert act.read_bytes() == first
    ex.rollback([WriteActivation(env)])
    (next(env.glob("lib/python*/site-packages")) / "nvidia" / "cublas" / "lib").rmdir()
    (next(env.glob("lib/python*/site-packages")) / "nvidia" / "cublas").rmdir()
    assert tree_digest(env) == pristine


def test_activate_scripts_keep_bytes_link_owner_and_mode(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    act = env / "bin" / "activate"
    # A latin-1 comment, a symlinked activate.csh, a 0600 activate.fish owned by nobody.
    act.write_bytes(act.read_bytes() + b"# caf\xe9 \xff\n")
    real_csh = tmp_path / "shared-activate.csh"
    real_csh.write_bytes((env / "bin" / "activate.csh").read_bytes())
    (env / "bin" / "activate.csh").unlink()
    (env / "bin" / "activate.csh").symlink_to(real_csh)
    fish = env / "bin" / "activate.fish"
    fish.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(fish, 65534, 65534)
    before = tree_digest(env), real_csh.read_bytes(), fish.stat().st_uid
    Executor(ctx, env).run([WriteActivation(env)])
    assert b"# caf\xe9 \xff\n# >>> tfgpu-install >>>\n" in act.read_bytes()
    assert (env / "bin" / "activate.csh").is_symlink() and b"tfgpu-install" in real_csh.read_bytes()
    assert fish.stat().st_uid == before[2] and stat.S_IMODE(fish.stat().st_mode) == 0o600
    Executor(ctx, env).rollback([WriteActivation(env)])
    assert (tree_digest(env), real_csh.read_bytes(), fish.stat().st_uid) == before


def test_unbalanced_marker_in_activate_is_refused_unchanged(ctx: Context, tmp_path: Path) -> None:
    env = _venv_with_libs(tmp_path)
    act = env / "bin" / "activate"
    act.write_bytes(act.read_bytes() + b"# >>> tfgpu-install >>>\nexport MINE=1\n")
    before = tree_digest(env)
    assert not WriteActivation(env).check(ctx)
    with pytest.raises(BadInputError, match="without its end marker"):
        Executor(ctx, env).run([WriteActivation(env)])
    assert tree_digest(env) == before


def test_conda_scripts_that_exist_as_links_stay_links(ctx: Context, tmp_path: Path) -> None:
    """A conda env whose activate.d script is a link to a shared file (kept by the user): the
    target is written, the link stays, rollback gives back the target's bytes and mode."""
    prefix = tmp_path / "conda-env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "etc/conda/activate.d").mkdir(parents=True)
    shared = tmp_path / "shared-activate.sh"
    shared.write_bytes(b"# the user's own script\r\nexport FOO=1\r\n")
    shared.chmod(0o600)
    (prefix / "etc/conda/activate.d/tfgpu-install.sh").symlink_to(shared)
    before = tree_digest(prefix), shared.read_bytes(), stat.S_IMODE(shared.stat().st_mode)
    ex = Executor(ctx, prefix)
    ex.run([WriteActivation(prefix, backend="conda")])
    assert (prefix / "etc/conda/activate.d/tfgpu-install.sh").is_symlink()
    assert b"_TFGPU_OLD_LD_LIBRARY_PATH" in shared.read_bytes()
    ex.rollback([WriteActivation(prefix, backend="conda")])
    after = {k: v for k, v in tree_digest(prefix).items() if not k.startswith("etc/conda/deactivate.d")}
    assert (after, shared.read_bytes(), stat.S_IMODE(shared.stat().st_mode)) == before
