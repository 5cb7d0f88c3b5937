"""`--backend conda` end to end, without conda: the real CLI as a subprocess, py-rattler solving
and installing the stand-in cudatoolkit/cudnn packages from a local file:// channel, the pip
part from the tests' local wheel index, verify on the CPU (--allow-cpu). For a CUDA 11 release
(TF 2.11.1) and a CUDA 10 release (TF 2.3.4): every library the build opens loads through
bin/tfgpu-run, the snapshot pins the conda packages, and rollback removes the env."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.conda_channel import CUDA11_LIBS, CUDA101_LIBS, cuda_channel
from tests.support.install_kit import MATRIX, cli_env, computing_wheelhouse, run_cli, write_knowledge
from tests.support.promised import absent

pytest.importorskip("rattler")
pytestmark = pytest.mark.skipif(absent("gcc"), reason="the stand-in libraries need gcc")

_PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _release(tf: str, cuda: str, cudnn: str) -> str:
    """A `cuda_from: system` row for the fake TF (the wheel is the tests' numpy-backed one)."""
    return f"""\
  - tensorflow: "{tf}"
    package: tensorflow
    released: "2022-11-18"
    pythons: ["{_PY}"]
    cuda: "{cuda}"
    cudnn: "{cudnn}"
    sass: ["3.5", "5.0", "6.0", "7.0", "8.0"]
    ptx: ["8.0"]
    manylinux: manylinux_2_17_x86_64
    min_glibc: "2.17"
    cuda_from: system
    constraints:
      numpy: ">=1.23.5,<2.0"
    source: "tests/steps/test_conda_install.py (a fake {tf} built with CUDA {cuda})"
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh = computing_wheelhouse(tmp_path_factory.mktemp("wheelhouse-conda"),
                              extra_tf=[("2.11.1", "11.2", "8"), ("2.3.4", "10.1", "7")])
    with wh.serve() as srv:  # type: ignore[attr-defined]
        yield srv


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return cuda_channel(tmp_path_factory.mktemp("conda-e2e") / "channel")


@pytest.mark.parametrize("tf,cuda,cudnn,libs", [
    ("2.11.1", "11.2", "8.1", CUDA11_LIBS + ("libcudnn.so.8",)),
    ("2.3.4", "10.1", "7.6", CUDA101_LIBS + ("libcudnn.so.7",)),
])
def test_conda_backend_without_conda_provisions_cuda_and_rolls_back(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, channel: Any, tf: str, cuda: str, cudnn: str,
    libs: tuple[str, ...],
) -> None:
    matrix = MATRIX.split("releases:\n")[0] + "releases:\n" + _release(tf, cuda, cudnn)
    knowledge = write_knowledge(tmp_path / "knowledge", matrix)
    env_dir = tmp_path / "data" / "conda-env"
    env = cli_env(tmp_env, knowledge, index.url)
    assert shutil.which("conda", path=env.get("PATH")) is None  # no conda here: rattler does it
    args = ["--profile", "stable", "--allow-cpu", "-y", "--backend", "conda", "--python", sys.executable,
            "--env", str(env_dir), "--conda-channel", channel.url, "--json"]

    first = run_cli(args, env)
    assert first.returncode == 0, first.stderr + first.stdout
    doc = json.loads(first.stdout)
    applied = [s["id"] for s in doc["steps"] if s["status"] == "applied"]
    assert applied[:3] == ["env.create", "packages.install", "conda.cuda"], applied
    assert doc["resolution"]["choice"]["tensorflow"] == tf

    # Every library the build opens loads from inside the env, through the launcher alone.
    code = "import ctypes, sys\nfor n in sys.argv[1:]:\n    ctypes.CDLL(n)\nprint('loaded', len(sys.argv) - 1)"
    clean = {"PATH": "/usr/bin:/bin", "HOME": tmp_env["HOME"]}
    ran = subprocess.run([str(env_dir / "bin" / "tfgpu-run"), "python", "-c", code, *libs],
                         env=clean, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and f"loaded {len(libs)}" in ran.stdout, ran.stderr
    # ... and not without it (the libraries are the env's own, not the system's).
    bare = subprocess.run([str(env_dir / "bin" / "python"), "-c", code, libs[0]], env=clean,
                          capture_output=True, text=True, timeout=120)
    assert bare.returncode != 0

    # The conda records are there (what the snapshot pins), and a re-run is a no-op.
    metas = sorted(p.name for p in (env_dir / "conda-meta").glob("*.json"))
    assert any(m.startswith("cudatoolkit-") for m in metas) and any(m.startswith("cudnn-") for m in metas)
    snaps = sorted((Path(tmp_env["TFGPU_STATE_DIR"]) / "snapshots").glob("*known-good*"))
    assert snaps, "no known-good snapshot"
    import yaml

    pinned = {p["name"]: p for p in yaml.safe_load(snaps[-1].read_text())["env"]["conda_packages"]}
    assert pinned["cudnn"]["version"].startswith(cudnn) and len(pinned["cudatoolkit"]["sha256"]) == 64
    again = run_cli(args, env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False, again.stdout + again.stderr

    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    assert not env_dir.exists()


def test_cuda_source_redist_on_a_venv_places_loads_and_rolls_back(
    tmp_path: Path, tmp_env: dict[str, str], index: Any,
) -> None:
    """The same CUDA 11 release on a venv with --cuda-source redist: NVIDIA-shaped archives
    from a loopback mirror, placed under <env>/lib/cuda-11.8.0, loaded through tfgpu-run."""
    from tests.support.cuda_redist import publish_cuda_redist
    from tests.support.httpserver import LoopbackServer

    matrix = MATRIX.split("releases:\n")[0] + "releases:\n" + _release("2.11.1", "11.2", "8.1")
    knowledge = write_knowledge(tmp_path / "knowledge", matrix)
    env_dir = tmp_path / "data" / "redist-env"
    env = cli_env(tmp_env, knowledge, index.url)
    sonames = {"cuda_cudart": ["libcudart.so.11.0"], "libcublas": ["libcublas.so.11", "libcublasLt.so.11"],
               "libcufft": ["libcufft.so.10"], "libcurand": ["libcurand.so.10"],
               "libcusolver": ["libcusolver.so.11"], "libcusparse": ["libcusparse.so.11"],
               "cuda_cupti": ["libcupti.so.11.8"], "cuda_nvrtc": ["libnvrtc.so.11.2"]}
    with LoopbackServer() as srv:
        publish_cuda_redist(srv, tmp_path / "so", "11.8.0", sonames)
        args = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
                "--cuda-source", "redist", "--cuda-mirror", srv.url("/"), "--json"]
        first = run_cli(args, env)
    assert first.returncode == 0, first.stderr + first.stdout
    applied = [s["id"] for s in json.loads(first.stdout)["steps"] if s["status"] == "applied"]
    assert "cuda.redist" in applied
    libs = [so for names in sonames.values() for so in names]
    code = "import ctypes, sys\nfor n in sys.argv[1:]:\n    ctypes.CDLL(n)\nprint('loaded', len(sys.argv) - 1)"
    ran = subprocess.run([str(env_dir / "bin" / "tfgpu-run"), "python", "-c", code, *libs],
                         env={"PATH": "/usr/bin:/bin", "HOME": tmp_env["HOME"]}, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0 and f"loaded {len(libs)}" in ran.stdout, ran.stderr
    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    assert not env_dir.exists()
