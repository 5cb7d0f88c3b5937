"""Machine shapes for resolver tests: Facts built in code, plus a small Knowledge excerpt.

`mini_knowledge()` is a hand-copied excerpt of the real tables (TensorFlow's tested build
configurations, NVIDIA's CUDA toolkit driver table, CUDA GPU compute capabilities) so the
resolver's logic can be tested independently of profiles/*.yaml. The table-driven tests
also run against the real loaded data.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from tfgpu_install.facts.model import Driver, Facts, Gpu, Host, PythonInterp, Tools
from tfgpu_install.knowledge.model import (
    Defect,
    DriverRow,
    FloorRow,
    GpuRow,
    Knowledge,
    KnownFailure,
    MinorCompatRow,
    Policy,
    Release,
)

TF_TABLE = "https://www.tensorflow.org/install/source#gpu"
CUDA_TABLE = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#id5"
MINOR_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/#minor-version-compatibility"
CC_TABLE = "https://developer.nvidia.com/cuda-gpus"

# CUDA toolkit -> minimum Linux x86_64 driver (NVIDIA's table 3).
DRIVERS = (
    ("10.0", "410.48"), ("10.1", "418.39"), ("10.2", "440.33"), ("11.0", "450.51.06"),
    ("11.1", "455.23"), ("11.2", "460.27.03"), ("11.3", "465.19.01"), ("11.4", "470.42.01"),
    ("11.5", "495.29.05"), ("11.6", "510.39.01"), ("11.7", "515.43.04"), ("11.8", "520.61.05"),
    ("12.0", "525.60.13"), ("12.1", "530.30.02"), ("12.2", "535.54.03"), ("12.3", "545.23.06"),
    ("12.4", "550.54.14"), ("12.5", "555.42.02"), ("12.6", "560.28.03"), ("12.8", "570.26"),
    ("12.9", "575.51.03"),
)

GPUS = (
    ("Tesla K80", "3.7", "Kepler"), ("GeForce GTX 970", "5.2", "Maxwell"),
    ("GeForce GTX 1080 Ti", "6.1", "Pascal"), ("Tesla T4", "7.5", "Turing"),
    ("NVIDIA A100-SXM4-40GB", "8.0", "Ampere"), ("NVIDIA GeForce RTX 3090", "8.6", "Ampere"),
    ("NVIDIA GeForce RTX 4090", "8.9", "Ada"), ("NVIDIA H100 80GB HBM3", "9.0", "Hopper"),
    ("NVIDIA GeForce RTX 5090", "12.0", "Blackwell"), ("GeForce GTX 680", "3.0", "Kepler"),
)

SASS_215 = ("5.0", "6.0", "7.0", "8.0")  # TF 2.15-2.17 (.bazelrc cuda_clang: sm_50,sm_60,sm_70,sm_80,compute_90)
SASS_218 = ("6.0", "7.0", "8.0", "8.9")  # TF 2.18+ (sm_60,sm_70,sm_80,sm_89,compute_90)
SASS_211 = ("3.5", "5.0", "6.0", "7.0", "7.5")  # TF 2.5-2.14 (sm_35,sm_50,sm_60,sm_70,sm_75,compute_80)


def release(
    tf: str,
    pythons: Sequence[str],
    cuda: Optional[str],
    cudnn: Optional[str],
    sass: Sequence[str],
    ptx: Sequence[str],
    *,
    released: str = "2024-01-01",
    min_glibc: str = "2.17",
    cuda_from: str = "pip",
    pins: Optional[dict[str, str]] = None,
    defects: Iterable[Defect] = (),
    package: str = "tensorflow",
) -> Release:
    return Release(
        tensorflow=tf,
        package=package,
        released=released,
        pythons=tuple(pythons),
        cuda=cuda,
        cudnn=cudnn,
        sass=tuple(sass),
        ptx=tuple(ptx),
        min_glibc=min_glibc,
        manylinux="manylinux2014_x86_64" if min_glibc == "2.17" else f"manylinux_{min_glibc.replace('.', '_')}_x86_64",
        cuda_from=cuda_from,
        extra="and-cuda" if cuda_from == "pip" else None,
        pins=dict(pins or {}),
        constraints={},
        defects=tuple(defects),
        sources={"default": TF_TABLE},
    )


def _pins(cuda_runtime: str, cudnn: str) -> dict[str, str]:
    return {"nvidia-cuda-runtime-cu12": cuda_runtime, "nvidia-cudnn-cu12": cudnn}


PY_39_312 = ("3.9", "3.10", "3.11", "3.12")


def mini_releases() -> tuple[Release, ...]:
    """Newest first, as matrix.yaml is."""
    return (
        release("2.21.0", ("3.10", "3.11", "3.12", "3.13"), "12.5", "9.3", SASS_218, ("9.0",),
                released="2026-03-01", min_glibc="2.27", pins=_pins("12.5.82", "9.3.0.75")),
        release("2.20.0", ("3.9", "3.10", "3.11", "3.12", "3.13"), "12.5", "9.3", SASS_218, ("9.0",),
                released="2025-08-13", min_glibc="2.27", pins=_pins("12.5.82", "9.3.0.75")),
        release("2.18.0", PY_39_312, "12.5", "9.3", SASS_218, ("9.0",), released="2024-10-24",
                pins=_pins("12.5.82", "9.3.0.75")),
        release("2.17.1", PY_39_312, "12.3", "8.9", SASS_215, ("9.0",), released="2024-10-24",
                pins=_pins("12.3.101", "8.9.7.29")),
        release("2.16.1", PY_39_312, "12.3", "8.9", SASS_215, ("9.0",), released="2024-03-08",
                pins=_pins("12.3.101", "8.9.7.29"),
                defects=(Defect("pip-cuda-not-found", "does not find its pip-installed CUDA libraries unaided",
                                "https://github.com/tensorflow/tensorflow/issues/63362",
                                fix="activation sets LD_LIBRARY_PATH"),)),
        release("2.15.1", ("3.9", "3.10", "3.11"), "12.2", "8.9", SASS_215, ("9.0",), released="2024-03-08",
                pins=_pins("12.2.140", "8.9.4.25")),
        release("2.15.0", ("3.9", "3.10", "3.11"), "12.2", "8.9", SASS_215, ("9.0",), released="2023-11-14",
                pins=_pins("12.2.140", "8.9.4.25"),
                defects=(Defect("tensorrt-pins", "the and-cuda extra pins TensorRT wheels that cannot be installed",
                                "https://github.com/tensorflow/tensorflow/issues/62075", blocks=True),)),
        release("2.14.1", ("3.9", "3.10", "3.11"), "11.8", "8.7", SASS_211, ("8.0",), released="2023-11-28",
                pins={"nvidia-cuda-runtime-cu11": "11.8.89", "nvidia-cudnn-cu11": "8.7.0.84"}),
        release("2.11.1", ("3.7", "3.8", "3.9", "3.10"), "11.2", "8.1", SASS_211, ("8.0",),
                released="2023-03-20", cuda_from="system"),
        release("2.10.1", ("3.7", "3.8", "3.9", "3.10"), "11.2", "8.1", SASS_211, ("8.0",),
                released="2022-11-16", cuda_from="system"),
        release("2.3.0", ("3.5", "3.6", "3.7", "3.8"), "10.1", "7.6", ("3.5", "3.7", "5.2", "6.0", "6.1", "7.0"),
                ("7.0",), released="2020-07-27", min_glibc="2.12", cuda_from="system"),
    )


def kernel_rules() -> tuple[tuple[FloorRow, ...], tuple[KnownFailure, ...]]:
    """profiles/kernels.yaml as it is (library floors, known failures): the resolver's GPU-family rules are
    data, so these tests read the real rows rather than a copy that could drift."""
    from pathlib import Path

    from tfgpu_install.knowledge.schema import parse_kernels

    path = Path(__file__).resolve().parents[2] / "profiles" / "kernels.yaml"
    return parse_kernels(path, "profiles/kernels.yaml")


def mini_knowledge(releases: Optional[Sequence[Release]] = None) -> Knowledge:
    floors, failures = kernel_rules()
    return Knowledge(
        releases=tuple(releases) if releases is not None else mini_releases(),
        drivers=tuple(DriverRow(c, d, CUDA_TABLE) for c, d in DRIVERS),
        minor_compat=(MinorCompatRow("11", "450.80.02", MINOR_COMPAT), MinorCompatRow("12", "525.60.13", MINOR_COMPAT)),
        gpus=tuple(GpuRow(n, cc, CC_TABLE, architecture=a) for n, cc, a in GPUS),
        floors=floors,
        known_failures=failures,
    )


def policy(name: str = "latest", **kw: object) -> Policy:
    return Policy(name=name, description=f"{name} (test)", prefer=str(kw.pop("prefer", "newest")), **kw)  # type: ignore[arg-type]


def gpu(name: str, cc: Optional[str], index: int = 0, **kw: object) -> Gpu:
    return Gpu(index=index, name=name, compute_capability=cc, memory_mib=16384, source="nvidia-smi",
               cc_source="nvidia-smi --query-gpu" if cc else None, **kw)  # type: ignore[arg-type]


def gpus_named(*names: str) -> tuple[Gpu, ...]:
    table = {n: cc for n, cc, _ in GPUS}
    return tuple(gpu(n, table[n], i) for i, n in enumerate(names))


def machine(
    driver: Optional[str],
    gpus: Sequence[Gpu] = (),
    *,
    max_cuda: Optional[str] = None,
    pythons: Sequence[str] = ("3.10.12",),
    glibc: Optional[str] = "2.35",
    os_id: str = "ubuntu",
    wsl: bool = False,
    arch: str = "x86_64",
    conda: Optional[str] = None,
    loaded: bool = True,
    gpu_on_pci: Optional[bool] = None,
    cuda_visible_devices: Optional[str] = None,
) -> Facts:
    """Facts for one machine shape. `max_cuda` None: the resolver looks it up in drivers.yaml."""
    return Facts(
        driver=Driver(
            version=driver,
            max_cuda=max_cuda,
            source="nvidia-smi" if driver else None,
            max_cuda_source="nvidia-smi" if max_cuda else None,
            loaded=loaded,
        ),
        gpus=tuple(gpus),
        host=Host(os="Windows" if os_id == "windows" else "Ubuntu 22.04.4 LTS", arch=arch, glibc=glibc, wsl=wsl,
                  container=None, sudo=False, os_id=os_id),
        pythons=tuple(PythonInterp(f"/usr/bin/python{'.'.join(v.split('.')[:2])}", v, "PATH") for v in pythons),
        tools=Tools(conda=conda),
        cuda_visible_devices=cuda_visible_devices,
        gpu_on_pci=gpu_on_pci if gpu_on_pci is not None else bool(gpus),
    )
