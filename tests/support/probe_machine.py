"""Helpers for probe tests: a planted system root, a ReplayRunner fed recorded outputs,
and a small knowledge set (real rows from NVIDIA's published tables) for lookups.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import yaml

from tfgpu_install.facts import gpu as smi
from tfgpu_install.facts.nvml import nvml_argv
from tfgpu_install.knowledge.model import DriverRow, GpuRow, Knowledge
from tfgpu_install.runner import ReplayRunner

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SMI = "/usr/bin/nvidia-smi"
LSPCI = "/usr/bin/lspci"
QUERY = (SMI, "--query-gpu=" + ",".join(smi.QUERY_FIELDS), "--format=csv,noheader,nounits")
QUERY_OLD = (SMI, "--query-gpu=" + ",".join(smi.QUERY_FIELDS_OLD), "--format=csv,noheader,nounits")

_CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus"
_TOOLKIT = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/ (table 3, Linux x86_64)"

# Real rows (NVIDIA's compute-capability list and CUDA toolkit driver table), enough for these tests.
MINI_KNOWLEDGE = Knowledge(
    releases=(),
    drivers=tuple(
        DriverRow(cuda, drv, _TOOLKIT)
        for cuda, drv in (
            ("6.0", "331.62"), ("8.0", "367.48"), ("9.0", "384.81"), ("9.2", "396.26"), ("10.0", "410.48"),
            ("10.1", "418.39"), ("10.2", "440.33"), ("11.0", "450.36.06"), ("11.4", "470.42.01"),
            ("12.0", "525.60.13"), ("12.2", "535.54.03"), ("12.3", "545.23.06"), ("12.4", "550.54.14"),
        )
    ),
    minor_compat=(),
    gpus=tuple(
        GpuRow(name, cc, _CUDA_GPUS)
        for name, cc in (
            ("GeForce GTX 680", "3.0"), ("Quadro K3100M", "3.0"), ("TITAN Xp", "6.1"),
            ("GeForce RTX 2080", "7.5"), ("GeForce RTX 2080 Ti", "7.5"), ("GeForce RTX 2080 SUPER", "7.5"),
            ("GeForce GTX 960M", "5.0"), ("Tesla K80", "3.7"), ("NVIDIA GeForce RTX 3060", "8.6"),
            ("NVIDIA GeForce RTX 3060 Ti", "8.6"), ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"),
            ("NVIDIA RTX PRO 1000 Blackwell Generation Laptop GPU", "12.0"), ("GeForce GTX 1080 Ti", "6.1"),
            ("GeForce GTX 1080", "6.1"), ("GeForce GTX 750 Ti", "5.0"), ("GeForce GTX 780", "3.5"),
            ("NVIDIA GeForce RTX 5070", "12.0"), ("NVIDIA GeForce RTX 5070 Ti", "12.0"),
            ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA GeForce RTX 3090", "8.6"),
            ("NVIDIA B200", "10.0"),
            ("Quadro RTX 4000", "7.5"), ("NVIDIA GeForce GTX 1650", "7.5"), ("NVIDIA A100-SXM4-40GB", "8.0"),
        )
    ),
)


def load_dir(name: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted((FIXTURES / name).glob("*.yaml")):
        with open(path) as fh:
            out.append(yaml.safe_load(fh))
    return out


def plant(root: Path, files: dict[str, str]) -> None:
    """Write files under a planted system root ('/proc/driver/nvidia/version' -> root/proc/...)."""
    for path, text in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def nvml_json(driver: str, cuda: int, gpus: list[dict[str, Any]]) -> str:
    """What the NVML child prints on a working machine (its own protocol; see facts/nvml.py)."""
    return json.dumps({"ok": True, "driver_version": driver, "cuda_driver_version": cuda, "gpus": gpus}) + "\n"


NVML_MISSING = json.dumps({"ok": False, "stage": "init", "error": "NVML Shared Library Not Found"}) + "\n"


def replay(
    *,
    nvml: str = NVML_MISSING,
    table: Optional[str] = None,
    query: Optional[str] = None,
    query_old: Optional[str] = None,
    lspci: Optional[str] = None,
    ldconfig: Optional[str] = None,
    long: Optional[str] = None,
) -> ReplayRunner:
    """A ReplayRunner for one machine. Only what is given exists; anything else run fails the test."""
    r = ReplayRunner()
    r.add(nvml_argv(), stdout=nvml)
    r.executables.pop(Path(nvml_argv()[0]).name, None)  # the interpreter is not a probed tool
    if query is not None:
        rc = 0 if smi.parse_smi_failure(query) is None and "not a valid field" not in query else (
            2 if "not a valid field" in query else 9
        )
        r.add(QUERY, stdout=query, returncode=rc)
    if query_old is not None:
        r.add(QUERY_OLD, stdout=query_old)
    if table is not None:
        r.add((SMI,), stdout=table, returncode=0 if smi.parse_smi_failure(table) is None else 9)
    if long is not None:
        r.add((SMI, "-q"), stdout=long)
    if lspci is not None:
        r.add((LSPCI, "-nn"), stdout=lspci)
    if ldconfig is not None:
        r.add(("/sbin/ldconfig", "-p"), stdout=ldconfig)
    return r
