"""libraries.check remembers a load that worked (steps/load_memo.py): the same files in a second
env (hard links, as uv makes them) are not loaded again; any change to what the loader would
read loads them again; a failure is never remembered; a memo file others may write is ignored.
gcc-built stand-ins for the CUDA/cuDNN libraries, loaded for real by the env's Python."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.promised import absent
from tests.support.wheelhouse import build_shared_lib
from tfgpu_install.context import Context, build_context
from tfgpu_install.env.target import TargetEnv
from tfgpu_install.runner import SubprocessRunner
from tfgpu_install.steps.libraries import CheckLibraries
from tfgpu_install.steps.load_memo import MEMO_FILE

PYV = f"{sys.version_info.major}.{sys.version_info.minor}"
LIBS = (("cuda_runtime", "libcudart.so.12"), ("cublas", "libcublas.so.12"), ("cublas", "libcublasLt.so.12"),
        ("cudnn", "libcudnn.so.9"))
pytestmark = pytest.mark.skipif(absent("gcc"), reason="needs gcc")


def _env(root: Path, like: "TargetEnv | None" = None) -> TargetEnv:
    """An env laid out by hand; `like`: its libraries hard-linked from that env (uv's warm cache)."""
    env = TargetEnv.at(root)
    nv = env.path / "lib" / f"python{PYV}" / "site-packages" / "nvidia"
    for sub, soname in LIBS:
        dest = nv / sub / "lib" / soname
        if like is None:
            build_shared_lib(dest, soname)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(like.site_packages() / "nvidia" / sub / "lib" / soname, dest)
    (env.path / "bin").mkdir(parents=True, exist_ok=True)
    (env.path / "bin" / "python").symlink_to(sys.executable)
    return env


def _step(env: TargetEnv) -> CheckLibraries:
    return CheckLibraries(env, "12.3", "9.1", {})


def _loads(ctx: Context) -> int:
    """How many load children this context's runner started."""
    assert isinstance(ctx.runner, SubprocessRunner)
    return sum(1 for argv in ctx.runner.log if argv[1:3] == ("-I", "-S"))


def test_the_same_files_in_a_second_env_are_not_loaded_again(tmp_env: dict[str, str], tmp_path: Path) -> None:
    first = _env(tmp_path / "env-1")
    ctx = build_context(tmp_env)
    assert _step(first).check(ctx) and _loads(ctx) == 1
    memo = ctx.cache_dir / MEMO_FILE
    assert memo.stat().st_mode & 0o777 == 0o600
    second = _env(tmp_path / "env-2", like=first)
    later = build_context(tmp_env)  # another run: the file, not memory
    assert _step(second).check(later) and _loads(later) == 0
    assert _step(second).apply(later)["loaded"] == [s for _, s in LIBS]  # apply answers the same way
    assert _loads(later) == 0


@pytest.mark.parametrize("change", ["rebuilt", "added", "ld_library_path", "ld_path_dir", "preload"])
def test_any_change_the_loader_would_see_loads_again(tmp_env: dict[str, str], tmp_path: Path, change: str) -> None:
    first = _env(tmp_path / "env-1")
    extra = tmp_path / "extra"
    extra.mkdir()
    env = {**tmp_env, "LD_LIBRARY_PATH": str(extra)}
    assert _step(first).check(build_context(env))
    second = _env(tmp_path / "env-2", like=first)
    lib_dir = second.site_packages() / "nvidia" / "cudnn" / "lib"
    if change == "rebuilt":  # a new file under the same name (another inode)
        (lib_dir / "libcudnn.so.9").unlink()
        build_shared_lib(lib_dir / "libcudnn.so.9", "libcudnn.so.9")
    elif change == "added":  # a library more where the loader looks
        build_shared_lib(lib_dir / "libcudnn_ops.so.9", "libcudnn_ops.so.9")
    elif change == "ld_library_path":
        env["LD_LIBRARY_PATH"] = f"{tmp_path}{os.pathsep}{extra}"
    elif change == "ld_path_dir":  # a file appears in (or leaves) a dir on LD_LIBRARY_PATH
        build_shared_lib(extra / "libz.so.1", "libz.so.1")
    else:
        build_shared_lib(tmp_path / "pre.so", "pre.so")
        env["LD_PRELOAD"] = str(tmp_path / "pre.so")
    ctx = build_context(env)
    assert _step(second).check(ctx) and _loads(ctx) == 1


def test_a_library_that_does_not_load_is_checked_each_time(tmp_env: dict[str, str], tmp_path: Path) -> None:
    import subprocess

    env = _env(tmp_path / "env")
    dep = tmp_path / "elsewhere" / "libdep.so.1"
    dep.parent.mkdir()
    (tmp_path / "f.c").write_text("int f(void){return 1;}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libdep.so.1", "-o", str(dep), str(tmp_path / "f.c")],
                   check=True)
    needs = env.site_packages() / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    needs.unlink()
    (tmp_path / "g.c").write_text("extern int f(void); int g(void){return f();}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-o", str(needs), str(tmp_path / "g.c"),
                    f"-L{dep.parent}", f"-l:{dep.name}"], check=True)
    ctx = build_context(tmp_env)
    assert not _step(env).check(ctx)
    assert not _step(env).check(ctx)
    assert _loads(ctx) == 2
    assert not (ctx.cache_dir / MEMO_FILE).exists()


@pytest.mark.parametrize("junk", ["writable", "not json", "not a list", "huge"])
def test_a_memo_others_may_write_or_a_damaged_one_is_not_believed(tmp_env: dict[str, str], tmp_path: Path,
                                                                    junk: str) -> None:
    env = _env(tmp_path / "env")
    assert _step(env).check(build_context(tmp_env))
    memo = Path(tmp_env["TFGPU_CACHE_DIR"]) / MEMO_FILE
    if junk == "writable":
        memo.chmod(0o666)
    elif junk == "not json":
        memo.write_text("{[")
    elif junk == "not a list":
        memo.write_text('{"keys": []}')
    else:
        memo.write_text('["' + "0" * (1 << 17) + '"]')
    ctx = build_context(tmp_env)
    assert _step(env).check(ctx) and _loads(ctx) == 1
    assert memo.stat().st_mode & 0o777 == 0o600  # rewritten by the load that worked: trusted again
    again = build_context(tmp_env)
    assert _step(env).check(again) and _loads(again) == 0


def test_a_cache_dir_that_cannot_be_written_only_costs_the_load(tmp_env: dict[str, str], tmp_path: Path) -> None:
    env = _env(tmp_path / "env")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a dir\n")  # (root may write into any dir, not into a file)
    ctx = build_context({**tmp_env, "TFGPU_CACHE_DIR": str(blocked / "cache")})
    assert _step(env).check(ctx) and _step(env).check(ctx) and _loads(ctx) == 2
    assert blocked.read_text() == "not a dir\n"
