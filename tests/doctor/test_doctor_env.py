"""doctor follows verify: on a machine without a GPU, `verify --env E` fails at `import tensorflow`
(numpy gone from a real env) and names `tfgpu-install doctor --env E`; that command explains it
(exit 13), instead of "nothing is broken"."""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.wheelhouse import build_shared_lib
from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.verify.gpucheck import tfgpucheck_layers as table

pytestmark = needs_gcc


def test_missing_numpy_is_diagnosed_without_a_gpu(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = source_env.env
    sp = sorted(env.glob("lib/python3*/site-packages"))[-1]
    moved = [p for p in sp.iterdir() if p.name == "numpy" or p.name.startswith("numpy-")]
    assert len(moved) == 2
    for p in moved:
        shutil.move(str(p), str(tmp_path / p.name))
    try:
        code, doc = cli(["verify", "--env", str(env)], source_env.environ, capsys)
        assert code == ExitCode.VERIFY_FAILED, doc
        failed = [lay for lay in doc["layers"] if lay["status"] == "fail"]
        assert failed and "numpy" in failed[0]["summary"], doc
        assert f"tfgpu-install doctor --env {env}" in (failed[0]["hint"] or ""), failed[0]

        code, doc = cli(["doctor", "--env", str(env)], source_env.environ, capsys)
        assert code == ExitCode.DIAGNOSED == 13, doc
        assert doc["status"] == "broken" and doc["broken"]["name"] == "import tensorflow", doc
        assert "'numpy'" in doc["broken"]["cause"] and "install" in doc["broken"]["fix"]
        assert any(c["status"] == "absent" for c in doc["checks"])  # and no GPU was seen: said, not hidden
        tf = _layers(doc)["tensorflow"]
        assert tf["status"] == "failed" and "numpy" in tf["summary"], tf
    finally:
        for p in moved:
            shutil.move(str(tmp_path / p.name), str(p))
    code, doc = cli(["doctor", "--env", str(env)], source_env.environ, capsys)
    assert code == ExitCode.NO_GPU, doc  # the env is fine again: nothing of it to diagnose here


# ------------------------------------------------------------------ verify's layers, by name


def _layers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lay["name"]: lay for lay in doc["layers"]}


def _libdir(env: Path, pkg: str) -> Path:
    return sorted(env.glob(f"lib/python3*/site-packages/nvidia/{pkg}/lib"))[-1]


@contextmanager
def _moved_away(path: Path, tmp: Path) -> Iterator[None]:
    """Move a file out of the env and back (never damaged in place: uv hard-links from its cache)."""
    keep = tmp / f"kept-{path.name}"
    shutil.move(str(path), str(keep))
    try:
        yield
    finally:
        shutil.move(str(keep), str(path))


def test_healthy_env_without_a_gpu_walks_verifys_layers_and_says_what_was_not_checked(
    source_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = cli(["doctor", "--env", str(source_env.env)], source_env.environ, capsys)
    assert code == ExitCode.NO_GPU, doc
    assert [lay["name"] for lay in doc["layers"]] == list(table.default_layers())  # verify's, in its order
    got = _layers(doc)
    for name in table.gpu_layers():
        if name in got:
            assert got[name]["status"] == "not checked" and "no GPU here" in got[name]["why"], got[name]
    for name, so in (("cuda-runtime", "libcudart.so.12"), ("cublas", "libcublasLt.so.12"), ("cudnn", "libcudnn.so.9")):
        assert got[name]["libraries"][so] == "loads", got[name]  # examined without a GPU
    assert got["tensorflow"]["status"] == "ok" and "CPU" in got["tensorflow"]["summary"]
    assert not any(lay["status"] == "ok" for name, lay in got.items() if name in table.gpu_layers())

    capsys.readouterr()
    assert main(["doctor", "--env", str(source_env.env)], environ=dict(source_env.environ)) == ExitCode.NO_GPU
    text = capsys.readouterr().out
    assert "not checked here: hardware, driver, cuda-runtime, cudnn, cublas" in text, text
    assert "Every layer checked is fine" not in text and "Nothing is broken" not in text


@pytest.mark.parametrize("pkg,soname,layer", [("cudnn", "libcudnn.so.9", "cudnn"),
                                               ("cublas", "libcublasLt.so.12", "cublas")])
def test_a_library_moved_away_is_the_cause_without_a_gpu(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str], pkg: str, soname: str, layer: str
) -> None:
    env = source_env.env
    with _moved_away(_libdir(env, pkg) / soname, tmp_path):
        code, doc = cli(["doctor", "--env", str(env)], source_env.environ, capsys)
    assert code == ExitCode.DIAGNOSED == 13, doc
    got = _layers(doc)
    assert got[layer]["status"] == "failed" and soname in got[layer]["summary"], got[layer]
    assert f"{soname} is missing from" in got[layer]["evidence"][0]
    assert doc["status"] == "broken" and doc["broken"]["name"] == f"{layer} libraries", doc["broken"]
    assert "install --env" in doc["broken"]["fix"]
    after = doc["layers"][table.number(layer) + 1:]
    assert after and {lay["status"] for lay in after} == {"not checked"}, after  # as verify stops
    assert "failed first" in after[-1]["why"]
    assert got["hardware"]["status"] == "not checked"  # and still no claim about the GPU


def test_a_cudnn9_sub_library_that_does_not_load_is_named_with_the_loaders_words(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """libcudnn_graph.so.9 present but needing a library that is not there: dlopen in the env's
    Python fails, and doctor says which soname and why (the loader's message)."""
    dep = build_shared_lib(tmp_path / "dep" / "libtfgpu_gone_dep.so.1", "libtfgpu_gone_dep.so.1",
                           ["tfgpu_gone_dep_stub"])
    src = tmp_path / "graph.c"
    src.write_text("int tfgpu_gone_dep_stub(void);\nint cudnn_graph_stub(void) { return tfgpu_gone_dep_stub(); }\n")
    built = tmp_path / "libcudnn_graph.so.9"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn_graph.so.9", "-o", str(built), str(src),
                    f"-L{dep.parent}", "-l:libtfgpu_gone_dep.so.1"], check=True, capture_output=True)
    dep.unlink()
    planted = _libdir(source_env.env, "cudnn") / "libcudnn_graph.so.9"
    assert not planted.exists()
    shutil.copy2(built, planted)  # a new file in the env, removed below
    try:
        code, doc = cli(["doctor", "--env", str(source_env.env)], source_env.environ, capsys)
    finally:
        planted.unlink()
    assert code == ExitCode.DIAGNOSED, doc
    cudnn = _layers(doc)["cudnn"]
    assert cudnn["status"] == "failed", cudnn
    assert "libcudnn_graph.so.9 does not load" in cudnn["summary"] and "libtfgpu_gone_dep.so.1" in cudnn["summary"]
    assert cudnn["libraries"]["libcudnn.so.9"] == "loads"


def test_a_broken_tensorflow_import_is_the_tensorflow_layer(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    init = sorted(source_env.env.glob("lib/python3*/site-packages/tensorflow/__init__.py"))[-1]
    with _moved_away(init, tmp_path):
        init.write_text("raise RuntimeError('tfgpu test: this build of TensorFlow is broken')\n")
        try:
            code, doc = cli(["doctor", "--env", str(source_env.env)], source_env.environ, capsys)
        finally:
            init.unlink()
    assert code == ExitCode.DIAGNOSED, doc
    tf = _layers(doc)["tensorflow"]
    assert tf["status"] == "failed" and "this build of TensorFlow is broken" in tf["summary"], tf
    assert doc["broken"]["name"] == "import tensorflow"
    assert {_layers(doc)[n]["status"] for n in ("cuda-runtime", "cudnn", "cublas")} == {"not checked"}


def _wheel_env(root: Path, graph_recorded: bool) -> Path:
    """A real venv holding the three CUDA wheels' layout (gcc-built libraries, dist-info with
    METADATA and RECORD): cuDNN 9's RECORD lists libcudnn_graph.so.9 when `graph_recorded`."""
    import sys

    env = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, capture_output=True)
    sp = sorted(env.glob("lib/python3*/site-packages"))[-1]
    wheels = {"nvidia_cuda_runtime_cu12-12.3.101": ("cuda_runtime", ["libcudart.so.12"]),
              "nvidia_cublas_cu12-12.3.4.1": ("cublas", ["libcublas.so.12", "libcublasLt.so.12"]),
              "nvidia_cudnn_cu12-9.1.0.70": ("cudnn", ["libcudnn.so.9"] + (["libcudnn_graph.so.9"] * graph_recorded))}
    for dist, (sub, sonames) in wheels.items():
        info = sp / f"{dist}.dist-info"
        info.mkdir()
        name, version = dist.rsplit("-", 1)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
        for so in sonames:
            build_shared_lib(sp / "nvidia" / sub / "lib" / so, so)
        (info / "RECORD").write_text("".join(f"nvidia/{sub}/lib/{so},,\n" for so in sonames))
    return env


def test_a_cudnn9_sub_library_its_wheel_installed_and_now_missing_is_named(
    tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _wheel_env(tmp_path, graph_recorded=True)
    graph = _libdir(env, "cudnn") / "libcudnn_graph.so.9"
    with _moved_away(graph, tmp_path):
        code, doc = cli(["doctor", "--env", str(env)], tmp_env, capsys)
    assert code == ExitCode.DIAGNOSED, doc
    cudnn = _layers(doc)["cudnn"]
    assert cudnn["status"] == "failed" and cudnn["summary"].startswith("libcudnn_graph.so.9 is missing from"), cudnn
    assert cudnn["libraries"] == {"libcudnn.so.9": "loads", "libcudnn_graph.so.9": "missing"}
    assert _layers(doc)["cuda-runtime"]["libraries"] == {"libcudart.so.12": "loads"}
    assert [c for c in doc["checks"] if c["status"] == "broken"] == [doc["broken"]]  # one cause, the first
    assert _layers(doc)["tensorflow"] == {**_layers(doc)["tensorflow"], "status": "not checked",
                                          "summary": "not judged"}  # verify stops there too

    code, doc = cli(["doctor", "--env", str(env)], tmp_env, capsys)  # back in place: loads, no cause there
    assert _layers(doc)["cudnn"]["libraries"]["libcudnn_graph.so.9"] == "loads", doc
    assert _layers(doc)["cudnn"]["status"] == "not checked"
    assert _layers(doc)["tensorflow"]["status"] == "failed"  # no TensorFlow in this env: that is the cause
    assert code == ExitCode.DIAGNOSED and doc["broken"]["name"] == "tensorflow"


def test_a_sub_library_the_wheel_never_shipped_is_not_asked_for(
    tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _wheel_env(tmp_path, graph_recorded=False)
    code, doc = cli(["doctor", "--env", str(env)], tmp_env, capsys)
    cudnn = _layers(doc)["cudnn"]
    assert cudnn["status"] == "not checked" and cudnn["libraries"] == {"libcudnn.so.9": "loads"}, cudnn


def _gpu_walk(tmp_env: dict[str, str], env: Path, sonames: list[str]) -> Any:
    """The walk on a machine whose driver answers (planted /proc, /dev and a recorded nvidia-smi);
    the env's Python runs for real (the import probe and the library load)."""
    from tests.support.doctor_layouts import make_ctx, plant_driver_ok, recorded_smi, replay
    from tfgpu_install.doctor.chain import walk
    from tfgpu_install.doctor.rules import load_rules
    from tfgpu_install.runner import SubprocessRunner
    from tfgpu_install.steps.libraries import _LOAD_SCRIPT

    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    python = str(env / "bin" / "python")
    runner = replay(recorded_smi("case_027"), python=python)
    real = SubprocessRunner()
    # a replayed command gets no environment: the wheels' lib dirs as load_failures puts them
    dirs = ":".join(str(d) for d in sorted(env.glob("lib/python3*/site-packages/nvidia/*/lib")))
    runner.responses[(python, "-I", "-S", "-c", _LOAD_SCRIPT, *sonames)] = lambda key: real.run(
        key, env={"LD_LIBRARY_PATH": dirs}, timeout=120)
    return walk(make_ctx(tmp_env, runner), load_rules(), env=str(env))


def test_with_a_gpu_the_gpu_layers_are_read_and_the_first_failing_layer_is_the_cause(
    tmp_env: dict[str, str], tmp_path: Path
) -> None:
    env = _wheel_env(tmp_path, graph_recorded=False)
    with _moved_away(_libdir(env, "cudnn") / "libcudnn.so.9", tmp_path):
        rep = _gpu_walk(tmp_env, env, ["libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12"])
    with_gpu = {v.name: v for v in rep.layers}
    assert [v.name for v in rep.layers] == list(table.default_layers())
    assert with_gpu["hardware"].status == with_gpu["driver"].status == "ok", rep.layers
    assert with_gpu["cuda-runtime"].status == "not checked", with_gpu["cuda-runtime"]
    assert "545.29.06" in with_gpu["driver"].summary
    cudnn = with_gpu["cudnn"]
    assert cudnn.status == "failed" and cudnn.summary.startswith("libcudnn.so.9 is missing from"), cudnn
    assert rep.broken is not None and rep.broken.name == "cudnn libraries"  # before the missing TensorFlow
    assert with_gpu["cuda-runtime"].status == "not checked" and "verify --env" in with_gpu["cuda-runtime"].why
    assert with_gpu["tensorflow"].status == "not checked" and "cudnn" in with_gpu["tensorflow"].why


def test_a_directory_that_is_no_python_env_is_named_not_its_libraries(
    tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "not-an-env").mkdir()
    code, doc = cli(["doctor", "--env", str(tmp_path / "not-an-env")], tmp_env, capsys)
    assert code == ExitCode.DIAGNOSED, doc
    got = _layers(doc)
    assert got["cudnn"]["status"] == "not checked" and "no Python environment" in got["cudnn"]["why"], got
    assert got["tensorflow"]["status"] == "failed" and "is not a Python environment" in got["tensorflow"]["summary"]
