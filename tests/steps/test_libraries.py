"""libraries.check against envs holding gcc-built CUDA/cuDNN stand-ins (installed from wheels
or laid out by hand), read with the ELF reader."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.support.promised import absent
from tests.support.wheelhouse import (  # noqa: F401  (fixtures)
    STABLE_PINS,
    STABLE_REQUIREMENTS,
    IndexServer,
    build_shared_lib,
    package_index,
    wheelhouse,
)
from tfgpu_install.context import Context
from tfgpu_install.env.target import TargetEnv
from tfgpu_install.errors import ExitCode, StepFailed
from tfgpu_install.files import tree_sha256
from tfgpu_install.steps.env import CreateEnv
from tfgpu_install.steps.libraries import CheckLibraries, expected_libraries, nvidia_lib_dirs
from tfgpu_install.steps.packages import InstallPackages

PYV = f"{sys.version_info.major}.{sys.version_info.minor}"
pytestmark = pytest.mark.skipif(absent("gcc"), reason="needs gcc")


def test_expected_libraries_for_cuda12_wheels() -> None:
    pins = {"nvidia-cudnn-cu12": "9.1.0.70", "nvidia-cufft-cu12": "11.0.12.1", "nvidia-nccl-cu12": "2.19.3",
            "nvidia-cuda-nvcc-cu12": "12.3.107", "numpy": "1.26.4"}
    names = [lib.soname for lib in expected_libraries("12.3", "9.1", pins)]
    assert names == ["libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcudnn.so.9",
                     "libcufft.so.11", "libnccl.so.2"]


def test_expected_libraries_cuda11_and_cudnn_from_pin() -> None:
    libs = expected_libraries("11.8", None, {"nvidia-cudnn-cu11": "8.6.0.163"})
    assert [(lib.package, lib.soname) for lib in libs] == [
        ("nvidia-cuda-runtime-cu11", "libcudart.so.11.0"),
        ("nvidia-cublas-cu11", "libcublas.so.11"),
        ("nvidia-cublas-cu11", "libcublasLt.so.11"),
        ("nvidia-cudnn-cu11", "libcudnn.so.8"),
    ]


def test_installed_wheels_pass(ctx: Context, tmp_path: Path, package_index: IndexServer) -> None:
    env = TargetEnv.at(tmp_path / "env")
    CreateEnv(env, PYV, Path(sys.executable)).apply(ctx)
    InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url).apply(ctx)
    step = CheckLibraries(env, "12.3", "9.1", STABLE_PINS)
    before = tree_sha256(env.path)
    assert step.check(ctx)
    record = step.apply(ctx)
    assert tree_sha256(env.path) == before  # read-only
    assert sorted(Path(p).name for p in record["libraries"]) == [
        "libcublas.so.12", "libcublasLt.so.12", "libcudart.so.12", "libcudnn.so.9"]
    assert [d.parent.name for d in nvidia_lib_dirs(env)] == ["cublas", "cuda_runtime", "cudnn"]
    # A plan for cuDNN 8 on this env: the message names the missing soname, where TF looks,
    # and the other major that is there.
    wrong = CheckLibraries(env, "12.3", "8.9", STABLE_PINS)
    assert not wrong.check(ctx)
    with pytest.raises(StepFailed) as err:
        wrong.apply(ctx)
    msg = err.value.message
    assert "libcudnn.so.8 is missing from" in msg and str(env.site_packages() / "nvidia" / "cudnn" / "lib") in msg
    assert "found libcudnn.so.9" in msg and err.value.code == ExitCode.STEP_FAILED
    assert "nvidia-cudnn-cu12" in (err.value.hint or "")


def _layout(tmp_path: Path) -> TargetEnv:
    """An env tree laid out by hand (no install): lib/pythonX.Y/site-packages/nvidia/..."""
    env = TargetEnv.at(tmp_path / "env")
    sp = env.path / "lib" / f"python{PYV}" / "site-packages" / "nvidia"
    build_shared_lib(sp / "cuda_runtime" / "lib" / "libcudart.so.12", "libcudart.so.12")
    build_shared_lib(sp / "cublas" / "lib" / "libcublas.so.12", "libcublas.so.12")
    build_shared_lib(sp / "cublas" / "lib" / "libcublasLt.so.12", "libcublasLt.so.12")
    build_shared_lib(sp / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9")
    (env.path / "bin").mkdir(parents=True, exist_ok=True)
    (env.path / "bin" / "python").symlink_to(sys.executable)  # the load check runs the env's Python
    return env


def _lib_needing(path: Path, soname: str, needed: Path) -> None:
    """A gcc-built library with a DT_NEEDED on `needed` (found by soname at load time)."""
    import subprocess

    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.with_suffix(".c")
    src.write_text("extern int f(void); int g(void){return f();}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(path), str(src),
                    f"-L{needed.parent}", f"-l:{needed.name}"], check=True)
    src.unlink()


CU11_PINS = {"nvidia-cublas-cu11": "11.11.3.6", "nvidia-cuda-cupti-cu11": "11.8.87",
             "nvidia-cuda-nvrtc-cu11": "11.8.89", "nvidia-cuda-runtime-cu11": "11.8.89",
             "nvidia-cudnn-cu11": "8.9.6.50", "nvidia-cufft-cu11": "10.9.0.58", "nvidia-curand-cu11": "10.3.0.86",
             "nvidia-cusolver-cu11": "11.4.1.48", "nvidia-cusparse-cu11": "11.7.5.86"}


def test_expected_libraries_for_the_cu11_pins_are_what_tf_2_5_to_2_13_dlopen() -> None:
    """The cu11 pins of matrix.yaml give every soname TF's dso loader asks for (matrix.yaml `sonames`)."""
    from tfgpu_install.knowledge.load import load_knowledge

    rel = load_knowledge().release("2.12.1")
    assert rel is not None and rel.pins_kind == "wheels"
    names = [lib.soname for lib in expected_libraries(rel.cuda or "", rel.cudnn, rel.pins)]
    assert set(rel.sonames) <= set(names), set(rel.sonames) - set(names)
    assert names == ["libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcudnn.so.8", "libcupti.so.11.8",
                     "libnvrtc.so.11.2", "libcufft.so.10", "libcurand.so.10", "libcusolver.so.11", "libcusparse.so.11"]


def test_a_library_in_place_whose_dependency_is_missing_fails_the_load_check(ctx: Context, tmp_path: Path) -> None:
    """In place with the right SONAME is not enough: a library whose own dependency cannot be found
    fails at dlopen, as it would in TF; once the dependency is in a wheel's lib dir, it loads."""
    import subprocess

    env = _layout(tmp_path)
    nv = env.site_packages() / "nvidia"
    dep = tmp_path / "elsewhere" / "libcublasLt.so.11"
    dep.parent.mkdir()
    (tmp_path / "f.c").write_text("int f(void){return 1;}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcublasLt.so.11", "-o", str(dep), str(tmp_path / "f.c")],
                   check=True)
    _lib_needing(nv / "cusolver" / "lib" / "libcusolver.so.11", "libcusolver.so.11", dep)
    step = CheckLibraries(env, "12.3", "9.1", {"nvidia-cusolver-cu12": "11.5.4.101"})
    findings = step.findings()
    assert findings and [f for f in findings if f.problem is not None] == []  # every file in place, right SONAME
    assert not step.check(ctx)  # but not done: it does not load
    with pytest.raises(StepFailed) as err:
        step.apply(ctx)
    assert "libcusolver.so.11 is in place but does not load" in str(err.value)
    assert "libcublasLt.so.11" in str(err.value)  # the dlerror names the missing dependency
    shutil.copy2(dep, nv / "cublas" / "lib" / dep.name)
    assert step.apply(ctx)["loaded"][-1] == "libcusolver.so.11"


def test_wrong_soname_truncated_and_missing(ctx: Context, tmp_path: Path) -> None:
    env = _layout(tmp_path)
    lib = env.site_packages() / "nvidia"
    assert CheckLibraries(env, "12.3", "9.1").check(ctx)

    # A cuDNN 8 library renamed to the cuDNN 9 name: the loader would still ask for .so.8.
    build_shared_lib(lib / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.8")
    with pytest.raises(StepFailed) as err:
        CheckLibraries(env, "12.3", "9.1").apply(ctx)
    assert "has soname libcudnn.so.8, the loader will ask for libcudnn.so.9" in err.value.message

    build_shared_lib(lib / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9")
    data = (lib / "cuda_runtime" / "lib" / "libcudart.so.12").read_bytes()
    (lib / "cuda_runtime" / "lib" / "libcudart.so.12").write_bytes(data[:100])  # a cut-off download
    (lib / "cublas" / "lib" / "libcublasLt.so.12").unlink()
    step = CheckLibraries(env, "12.3", "9.1")
    problems = [f.problem for f in step.findings() if f.problem]
    assert len(problems) == 2
    assert "libcudart.so.12 is not a readable shared library" in problems[0]
    assert problems[1] == f"libcublasLt.so.12 is missing from {lib / 'cublas' / 'lib'}"
    with pytest.raises(StepFailed) as err:
        step.apply(ctx)
    assert "(and 1 more: libcublasLt.so.12)" in err.value.message
    step.undo(ctx, {})  # nothing to undo, and it says so by doing nothing


def test_nvidia_lib_dirs_skips_dirs_without_libraries(tmp_path: Path) -> None:
    env = _layout(tmp_path)
    (env.site_packages() / "nvidia" / "cuda_nvcc" / "lib").mkdir(parents=True)  # only __init__.py in real wheels
    (env.site_packages() / "nvidia" / "cuda_nvcc" / "lib" / "__init__.py").write_text("")
    assert [d.parent.name for d in nvidia_lib_dirs(env)] == ["cublas", "cuda_runtime", "cudnn"]
    assert nvidia_lib_dirs(TargetEnv.at(tmp_path / "nothing")) == []


def test_records_which_dirs_tf_itself_searches(ctx: Context, tmp_path: Path) -> None:
    """TF's framework library carries a RUNPATH ($ORIGIN/../nvidia/<pkg>/lib); directories
    outside it are recorded (activation covers them), and that is not a failure."""
    import subprocess

    env = _layout(tmp_path)
    from tfgpu_install.steps.libraries import tf_search_dirs

    assert tf_search_dirs(env) is None  # no TF library here yet
    tf = env.site_packages() / "tensorflow"
    tf.mkdir()
    src = tmp_path / "fw.c"
    src.write_text("int tf_framework(void){return 2;}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtensorflow_framework.so.2", "-Wl,--enable-new-dtags",
                    "-Wl,-rpath,$ORIGIN/../nvidia/cudnn/lib:$ORIGIN/../nvidia/cublas/lib",
                    "-o", str(tf / "libtensorflow_framework.so.2"), str(src)], check=True)
    nv = env.site_packages() / "nvidia"
    assert tf_search_dirs(env) == [nv / "cudnn" / "lib", nv / "cublas" / "lib"]
    record = CheckLibraries(env, "12.3", "9.1").apply(ctx)
    assert record["tf_runpath_known"] is True
    assert record["outside_tf_runpath"] == [str(nv / "cuda_runtime" / "lib")]


def test_nvshmem_is_expected_where_tf_2_22_pins_it() -> None:
    libs = expected_libraries("12.5", "9.10", {"nvidia-nvshmem-cu12": "3.2.5", "nvidia-cudnn-cu12": "9.10.2.21"})
    assert ("nvidia-nvshmem-cu12", "nvshmem", "libnvshmem_host.so.3") in [(x.package, x.subdir, x.soname) for x in libs]


def _new_wheel(env: TargetEnv, with_lib: bool = True) -> Path:
    """A pinned nvidia-* wheel the tables do not know, installed as uv would leave it: files + RECORD."""
    sp = env.site_packages()
    lib = sp / "nvidia" / "newthing" / "lib" / "libnewthing.so.7"
    build_shared_lib(lib, "libnewthing.so.7")
    plugin = build_shared_lib(sp / "nvidia" / "newthing" / "lib" / "newthing_transport_mpi.so.7", "")
    info = sp / "nvidia_newthing_cu12-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "RECORD").write_text(f"nvidia/newthing/lib/libnewthing.so.7,sha256=x,{lib.stat().st_size}\n"
                                 f"nvidia/newthing/lib/{plugin.name},sha256=x,1\n"
                                 "nvidia_newthing_cu12-1.2.3.dist-info/RECORD,,\n")
    if not with_lib:
        lib.unlink()
    return lib


def test_a_new_and_cuda_wheel_is_checked_and_recorded_by_its_record(ctx: Context, tmp_path: Path) -> None:
    """Issue #40 item 5: an and-cuda package the tables did not know (as nvshmem was) is checked from the
    wheel's own RECORD: its lib*.so* by SONAME, in place and loading, and recorded like the others."""
    env = _layout(tmp_path)
    _new_wheel(env)
    step = CheckLibraries(env, "12.3", "9.1", {"nvidia-newthing-cu12": "1.2.3"})
    assert "nvidia-newthing-cu12" in step.describe()
    assert step.check(ctx)
    record = step.apply(ctx)
    assert "libnewthing.so.7" in record["loaded"] and not any("transport" in p for p in record["libraries"])


@pytest.mark.parametrize("attack", ["library-gone", "not-installed"])
def test_a_new_and_cuda_wheel_that_is_broken_fails_the_check(attack: str, ctx: Context, tmp_path: Path) -> None:
    env = _layout(tmp_path)
    if attack == "library-gone":
        _new_wheel(env, with_lib=False)
    step = CheckLibraries(env, "12.3", "9.1", {"nvidia-newthing-cu12": "1.2.3"})
    assert not step.check(ctx)
    with pytest.raises(StepFailed) as err:
        step.apply(ctx)
    want = "libnewthing.so.7 is missing" if attack == "library-gone" else "nvidia-newthing-cu12 is not installed"
    assert want in err.value.message
