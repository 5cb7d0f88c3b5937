"""`tfgpu-install probe`: in-process against recorded outputs, and once as a real subprocess here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.probe_machine import load_dir, nvml_json, plant, replay

from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.runner import ReplayRunner

CASES = {c["id"]: c for c in load_dir("shared/nvidia-smi") + load_dir("nvidia-smi-extra")}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_env: dict[str, str]) -> dict[str, str]:
    plant(Path(tmp_env["TFGPU_ROOT"]), {"/etc/os-release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'})
    empty = Path(tmp_env["HOME"]) / "bin"
    empty.mkdir()
    return {**tmp_env, "PATH": str(empty)}


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_no_gpu_says_so_with_sources_and_exit_code(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe"], environ=env, runner=replay())
    out = capsys.readouterr().out
    assert code == ExitCode.NO_GPU == 3
    assert "no NVIDIA GPU found" in out
    for source in ("nvml", "nvidia-smi", "/proc/driver/nvidia/version", "/sys/module/nvidia/version"):
        assert source in out


def test_gpu_machine_json_contract(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    runner = replay(
        nvml=nvml_json("535.104.05", 12020, [
            {"index": 0, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6", "memory_mib": 24576},
            {"index": 1, "name": "NVIDIA GeForce GTX 1080 Ti", "compute_capability": "6.1", "memory_mib": 11264},
        ]),
        query="0, NVIDIA GeForce RTX 3090, GPU-1, 00000000:01:00.0, 535.104.05, 8.6, 24576\n"
              "1, NVIDIA GeForce GTX 1080 Ti, GPU-2, 00000000:02:00.0, 535.104.05, 6.1, 11264\n",
        table=CASES["case_027"]["verbatim"].replace("545.29.06", "535.104.05").replace("12.3", "12.2"),
    )
    _driver_node(env)
    code = main(["probe", "--json"], environ=env, runner=runner)
    doc = _json(capsys)
    assert code == ExitCode.OK
    assert doc["driver"]["version"] == "535.104.05" and doc["driver"]["max_cuda"] == "12.2"
    assert doc["driver"]["source"] == "nvml"
    assert [(g["index"], g["name"], g["compute_capability"], g["memory_mib"], g["source"]) for g in doc["gpus"]] == [
        (0, "NVIDIA GeForce RTX 3090", "8.6", 24576, "nvml"), (1, "NVIDIA GeForce GTX 1080 Ti", "6.1", 11264, "nvml")]
    assert set(doc["host"]) >= {"os", "arch", "glibc", "wsl", "container", "sudo"}
    assert doc["host"]["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert isinstance(doc["pythons"], list) and isinstance(doc["cuda_installs"], list)
    assert isinstance(doc["problems"], list)


def test_human_output_has_gpu_table(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    runner = replay(nvml=nvml_json("550.54.14", 12040, [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_mib": 81559}]))
    _driver_node(env)
    assert main(["probe"], environ=env, runner=runner) == ExitCode.OK
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "550.54.14" in out and "[nvml]" in out


@pytest.mark.parametrize("case_id", ["case_011", "case_013", "extra_001", "case_025"])
def test_from_nvidia_smi_file(case_id: str, env: dict[str, str], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "smi.txt"
    saved.write_text(CASES[case_id]["verbatim"])
    runner = ReplayRunner()  # parse only: no live GPU source may run
    code = main(["probe", "--json", "--from-nvidia-smi", str(saved)], environ=env, runner=runner)
    doc = _json(capsys)
    assert code == ExitCode.OK and runner.calls == []
    assert doc["driver"]["source"] == "nvidia-smi file"
    assert doc["driver"]["version"] == CASES[case_id]["expected"]["driver_version"].split()[0]
    assert doc["gpus"] and all(g["source"] == "nvidia-smi file" for g in doc["gpus"])


def test_from_nvidia_smi_stdin_failure_output(env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(CASES["case_023"]["verbatim"]))
    code = main(["probe", "--json", "--from-nvidia-smi", "-"], environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.NO_GPU
    assert any("couldn't communicate" in p["reason"] for p in doc["problems"])


def test_bad_inputs_get_documented_codes(env: dict[str, str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not nvidia-smi\n")
    assert main(["probe", "--from-nvidia-smi", str(junk)], environ=env, runner=ReplayRunner()) == ExitCode.BAD_INPUT
    assert "no nvidia-smi output recognized" in " ".join(capsys.readouterr().err.split())  # rich wraps lines
    assert main(["probe", "--assume-driver", "new"], environ=env, runner=ReplayRunner()) == ExitCode.USAGE


def test_env_override_says_so(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    env = {**env, "TFGPU_OVERRIDE_DRIVER": "535.104.05", "TFGPU_OVERRIDE_GPUS": "8.6,8.9"}
    code = main(["probe", "--json", "--assume-python", "3.11"], environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.OK
    assert doc["driver"]["source"] == "override:env"
    assert ([(g["compute_capability"], g["source"]) for g in doc["gpus"]]
            == [("8.6", "override:env"), ("8.9", "override:env")])
    assert [(p["version"], p["source"]) for p in doc["pythons"]] == [("3.11", "override:flag")]


def test_assumed_gpu_names_through_the_real_tables(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["probe", "--json", "--assume-driver", "550.54.14", "--assume-gpu", "RTX 4090", "--assume-gpu", "Tesla K80"]
    code = main(argv, environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.OK
    assert [(g["name"], g["compute_capability"], g["source"]) for g in doc["gpus"]] == [
        ("RTX 4090", "8.9", "override:flag"), ("Tesla K80", "3.7", "override:flag")]
    assert doc["gpus"][0]["cc_source"].startswith("table:gpus.yaml")
    assert (doc["driver"]["max_cuda"], doc["driver"]["max_cuda_source"]) == ("12.4", "table:drivers.yaml")


def test_vgpu_and_foreign_gpus_through_the_probe(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["probe", "--json", "--assume-driver", "550.54.14", "--assume-gpu", "GRID A100D-40C",
            "--assume-gpu", "AMD Radeon RX 7900 XTX"]
    main(argv, environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert doc["gpus"][0]["compute_capability"] == "8.0"
    assert "vGPU profile on a physical NVIDIA A100" in doc["gpus"][0]["cc_source"]
    assert doc["gpus"][1]["compute_capability"] is None  # never a guessed capability
    reasons = " ".join(p["reason"] for p in doc["problems"])
    assert "is an AMD GPU, not an NVIDIA one" in reasons and "tensorflow-rocm" in reasons


def test_real_subprocess_probe_json_here() -> None:
    """The real thing on this machine: real NVML child, real files, real ldconfig."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFGPU_")}
    done = subprocess.run([sys.executable, "-m", "tfgpu_install", "probe", "--json"], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)
    doc = json.loads(done.stdout)
    assert set(doc) >= {"driver", "gpus", "host", "pythons", "cuda_installs", "problems"}
    assert done.returncode == (ExitCode.OK if doc["gpus"] else ExitCode.NO_GPU)
    if not doc["gpus"]:
        assert any("no NVIDIA GPU found" in p["reason"] for p in doc["problems"])
        assert {t["source"] for t in doc["sources_tried"]} >= {"nvml", "/proc/driver/nvidia/version"}
    assert doc["host"]["arch"] and doc["pythons"]


# ---------------------------------------------------------------- issue 12: every real machine
# `--assume-gpu NAME` for laptop / Max-Q / "D" / workstation / Jetson names; `--from-nvidia-smi` of a -q
# whose name no table knows but whose PCI device id does; failure messages read as machine states.

# NVIDIA's compute capability for each (https://developer.nvidia.com/cuda-gpus).
ASSUMED = [
    ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"), ("GeForce GTX 1070 with Max-Q Design", "6.1"),
    ("NVIDIA GeForce RTX 2080 Super with Max-Q Design", "7.5"), ("NVIDIA GeForce RTX 4090 D", "8.9"),
    ("NVIDIA RTX A2000 8GB Laptop GPU", "8.6"), ("NVIDIA RTX 3500 Ada Generation Laptop GPU", "8.9"),
    ("Quadro RTX 5000 with Max-Q Design", "7.5"), ("Jetson AGX Orin", "8.7"), ("Jetson Nano", "5.3"),
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "8.0"),
]

# The PCI block of a real `nvidia-smi -q` (NVIDIA/nvidia-docker#1753: Device Id 0x140110DE = GM206,
# GeForce GTX 960). The product name is replaced by "NVIDIA Graphics Device", what nvidia-smi prints for
# a GPU its driver's name table does not know yet, so only the device id can identify it.
Q_UNKNOWN_NAME = """\
==============NVSMI LOG==============

Timestamp                                 : Thu Jun  2 11:17:03 2022
Driver Version                            : 510.47.03
CUDA Version                              : 11.6

Attached GPUs                             : 1
GPU 00000000:01:00.0
    Product Name                          : NVIDIA Graphics Device
    Product Brand                         : GeForce
    PCI
        Bus                               : 0x01
        Device                            : 0x00
        Domain                            : 0x0000
        Device Id                         : 0x140110DE
        Bus Id                            : 00000000:01:00.0
        Sub System Id                     : 0x00007377
"""


@pytest.mark.parametrize("name,cc", ASSUMED)
def test_assume_gpu_name_kinds(name: str, cc: str, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--json", "--assume-driver", "550.54.14", "--assume-gpu", name], environ=env,
                runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.OK
    g = doc["gpus"][0]
    assert (g["name"], g["compute_capability"]) == (name, cc)
    assert g["cc_source"].startswith("table:gpus.yaml")


def test_unknown_name_known_device_id(env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    smi = tmp_path / "q.txt"
    smi.write_text(Q_UNKNOWN_NAME)
    code = main(["probe", "--json", "--from-nvidia-smi", str(smi)], environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.OK
    g = doc["gpus"][0]
    assert (g["name"], g["pci_device_id"], g["compute_capability"]) == ("NVIDIA Graphics Device", "0x140110DE", "5.2")
    assert g["cc_source"].startswith("table:pci_ids.yaml (device 1401")
    assert not [p for p in doc["problems"] if p["field"] == "gpus[0].compute_capability"]


def test_unknown_gpu_is_reported_with_what_was_tried(env: dict[str, str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    text = Q_UNKNOWN_NAME.replace("0x140110DE", "0xfffe10DE").replace(
        "    Product Brand", "    Product Architecture                  : Ampere\n    Product Brand")
    smi = tmp_path / "q.txt"
    smi.write_text(text)
    code = main(["probe", "--json", "--from-nvidia-smi", str(smi)], environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.OK and doc["gpus"][0]["compute_capability"] is None
    reason = next(p["reason"] for p in doc["problems"] if p["field"] == "gpus[0].compute_capability")
    assert "'NVIDIA Graphics Device' is not in gpus.yaml" in reason
    assert "PCI device id 0xfffe10DE not in pci_ids.yaml" in reason
    assert "architecture Ampere has several compute capabilities (8.0, 8.6, 8.7)" in reason


def test_architecture_is_the_last_fallback(env: dict[str, str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = Q_UNKNOWN_NAME.replace("0x140110DE", "0xfffe10DE").replace(
        "    Product Brand", "    Product Architecture                  : Turing\n    Product Brand")
    smi = tmp_path / "q.txt"
    smi.write_text(text)
    assert main(["probe", "--json", "--from-nvidia-smi", str(smi)], environ=env, runner=ReplayRunner()) == ExitCode.OK
    g = _json(capsys)["gpus"][0]
    assert (g["compute_capability"], g["architecture"]) == ("7.5", "Turing")
    assert g["cc_source"].startswith("table:gpus.yaml (architecture Turing")


@pytest.mark.parametrize("text,state_words", [
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.\n", "kernel module is not loaded"),
    ("Unable to determine the device handle for GPU0000:01:00.0: Unknown Error\n", "fell off the bus"),
    # issue 26: shapes seen in real pastes
    ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
     "Driver is properly installed and present in your system.\nPlease also try adding directory that contains "
     "libnvidia-ml.so to your system PATH.\n", "libnvidia-ml.so is not installed"),
    ("NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.\n", "kernel module is not loaded"),
])
def test_failure_message_is_a_machine_state(text: str, state_words: str, env: dict[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    smi = tmp_path / "smi.txt"
    smi.write_text(text)
    code = main(["probe", "--json", "--from-nvidia-smi", str(smi)], environ=env, runner=ReplayRunner())
    doc = _json(capsys)
    assert code == ExitCode.NO_GPU  # a machine without a working driver, not an unreadable file (5)
    reasons = " ".join(p["reason"] for p in doc["problems"])
    assert state_words in reasons


def _driver_node(env: dict[str, str]) -> None:
    """/dev/nvidiactl in the planted root: a machine whose NVML answers has the driver's node."""
    node = Path(env["TFGPU_ROOT"]) / "dev" / "nvidiactl"
    node.parent.mkdir(parents=True, exist_ok=True)
    node.write_text("")
