"""`tfgpu-install verify` through the real CLI entry point, against real venvs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.stublibs import StubLibs, plant_pci, stubs  # noqa: F401
from tests.support.tfenv import make_venv, tf_env  # noqa: F401
from tfgpu_install.cli import main
from tfgpu_install.context import build_context
from tfgpu_install.env.journal import Journal
from tfgpu_install.env.registry import remember_env
from tfgpu_install.env.state import env_state_dir
from tfgpu_install.env.verification import read_record


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("bare") / "env")


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_no_gpu_here(tmp_env: dict[str, str], venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--env", str(venv), "--json"], environ=tmp_env) == 9
    doc = _json(capsys)
    assert doc["ok"] is False and doc["layers"][0]["status"] == "fail"
    assert "no NVIDIA GPU" in doc["layers"][0]["summary"]
    assert [lay["status"] for lay in doc["layers"][1:]] == ["skip"] * 5
    assert read_record(build_context(tmp_env), venv) is not None  # `status` sees the last verification


def test_human_output(tmp_env: dict[str, str], venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--env", str(venv)], environ=tmp_env) == 9
    out = capsys.readouterr().out
    assert "hardware" in out and "no NVIDIA GPU" in out and "Fix:" in out


def test_stub_gpu_stack(tmp_env: dict[str, str], stubs: StubLibs, venv: Path,  # noqa: F811
                        capsys: pytest.CaptureFixture[str]) -> None:
    plant_pci(Path(tmp_env["TFGPU_ROOT"]), [("0000:01:00.0", "0x10de", "0x030000")])
    # The placed libraries: as the cuDNN step lays them out, in <env>/lib/cudnn-<version>/lib.
    env = make_venv(Path(tmp_env["HOME"]) / "env")
    placed = env / "lib" / "cudnn-8.9.7" / "lib"
    placed.mkdir(parents=True)
    for lib in stubs.env.glob("lib*.so.*"):
        (placed / lib.name).symlink_to(lib)
    environ = dict(tmp_env, LD_LIBRARY_PATH=str(stubs.driver), STUB_CUDART_COUNT_ERROR="35")
    assert main(["verify", "--env", str(env), "--json"], environ=environ) == 9
    doc = _json(capsys)
    assert [lay["status"] for lay in doc["layers"]] == ["pass", "pass", "fail", "skip", "skip", "skip"]
    assert doc["layers"][2]["error"] == {"code": 35, "name": "cudaErrorInsufficientDriver"}
    assert doc["plan"]["lib_dirs"] == [] and str(placed) in doc["layers"][2]["measured"]["libcudart"]


def test_default_env_is_the_last_installed(tmp_env: dict[str, str], venv: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # what a verified install leaves: its journal, and the env made the default (env/registry.py)
    Journal.for_env(build_context(tmp_env), venv).append("run", env=str(venv), plan={})
    remember_env(build_context(tmp_env), venv)
    assert main(["verify", "--json"], environ=tmp_env) == 9
    assert _json(capsys)["env"] == str(venv)


def test_no_env_known_runs_the_host_layers(tmp_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    # The first thing a new user tries: nothing installed, no GPU here -> probe's wording, exit 3, how to install.
    assert main(["verify", "--json"], environ=tmp_env) == 3
    doc = _json(capsys)
    assert doc["message"].startswith("no NVIDIA GPU found; tried: ") and doc["ok"] is False
    assert doc["mode"] == "host" and doc["env"] is None
    assert doc["layers"][0]["status"] == "fail" and "no NVIDIA GPU" in doc["layers"][0]["summary"]
    assert [lay["status"] for lay in doc["layers"][1:]] == ["skip"] * 4  # host layers only: 0-4
    assert "--allow-cpu" in doc["hint"] and "no environment installed" in doc["next"]
    assert not (Path(tmp_env["TFGPU_STATE_DIR"]) / "envs").exists()  # nothing recorded for no env


def test_host_only_on_a_stub_gpu_stack(tmp_env: dict[str, str], stubs: StubLibs,  # noqa: F811
                                       capsys: pytest.CaptureFixture[str]) -> None:
    plant_pci(Path(tmp_env["TFGPU_ROOT"]), [("0000:01:00.0", "0x10de", "0x030000")])
    libs = f"{stubs.driver}:{stubs.env}"  # system libraries: found through the loader
    assert main(["verify", "--host-only", "--json"], environ=dict(tmp_env, LD_LIBRARY_PATH=libs)) == 0
    doc = _json(capsys)
    assert [lay["status"] for lay in doc["layers"]] == ["pass"] * 5 and doc["mode"] == "host"
    assert doc["layers"][4]["measured"]["max_abs_error"] == 0.0
    assert doc["extras"]["visible_devices"]["mapping"][0]["matched_by"] == "uuid"
    environ = dict(tmp_env, LD_LIBRARY_PATH=libs, STUB_CUDART_COUNT_ERROR="35")
    assert main(["verify", "--host-only", "--json"], environ=environ) == 9
    assert _json(capsys)["layers"][2]["error"]["name"] == "cudaErrorInsufficientDriver"


def test_host_only_searches_other_python_envs(tmp_env: dict[str, str], stubs: StubLibs,  # noqa: F811
                                              capsys: pytest.CaptureFixture[str]) -> None:
    plant_pci(Path(tmp_env["TFGPU_ROOT"]), [("0000:01:00.0", "0x10de", "0x030000")])
    site = Path(tmp_env["HOME"]) / "other-env/lib/python3.12/site-packages"
    for pkg, names in (("cuda_runtime", ["libcudart.so.12"]), ("cublas", ["libcublas.so.12"]),
                       ("cudnn", ["libcudnn.so.8"])):
        (site / "nvidia" / pkg / "lib").mkdir(parents=True)
        for name in names:
            (site / "nvidia" / pkg / "lib" / name).symlink_to(stubs.env / name)
    argv = ["verify", "--host-only", "--search", str(site.parents[2]), "--json"]
    assert main(argv, environ=dict(tmp_env, LD_LIBRARY_PATH=str(stubs.driver))) == 0
    assert _json(capsys)["layers"][2]["measured"]["libcudart"].startswith(str(site))


def test_env_that_is_not_an_env(tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--env", str(tmp_path), "--json"], environ=tmp_env) == 6
    assert "has no bin/python" in _json(capsys)["message"]


def test_negative_burn(tmp_env: dict[str, str], venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--env", str(venv), "--burn", "-1", "--json"], environ=tmp_env) == 2


@pytest.mark.slow
def test_allow_cpu_env_passes(tmp_env: dict[str, str], tf_env: Path,  # noqa: F811
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--env", str(tf_env), "--cpu-ok", "--json"], environ=tmp_env) == 0
    doc = _json(capsys)
    assert doc["ok"] is True and doc["gpu_verified"] is False and doc["layers"][5]["status"] == "pass"
    # The plan came from the env's own wheels, and the next run reuses the recorded (CPU-only) plan.
    assert doc["plan"]["cuda"] == "12.3" and doc["plan"]["cudnn"] == "8.9.7.29" and doc["plan"]["cpu_only"]
    assert (env_state_dir(build_context(tmp_env), tf_env) / "verify.json").is_file()
    assert main(["verify", "--env", str(tf_env), "--json"], environ=tmp_env) == 0
    assert _json(capsys)["mode"] == "cpu"
