"""Facts: plain frozen data gathered once per run. Every machine value records its source.

Sources are short strings: "nvml", "nvidia-smi", "nvidia-smi -q", "nvidia-smi --query-gpu",
"/proc/driver/nvidia/version", "/sys/module/nvidia/version", "lspci", "table:drivers.yaml",
"table:gpus.yaml", "override:env", "override:flag", "nvidia-smi file" ...
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from tfgpu_install.guard.jsondoc import JSONObject


@dataclass(frozen=True)
class Problem:
    """Something the probe could not learn or found inconsistent. `field` names the JSON key."""

    field: str
    reason: str
    severity: str = "info"  # info | warning | error


@dataclass(frozen=True)
class Driver:
    version: Optional[str]  # "535.104.05"
    max_cuda: Optional[str]  # "12.2": highest CUDA the driver supports
    source: Optional[str]  # where `version` came from
    max_cuda_source: Optional[str] = None  # header/NVML, or "table:drivers.yaml"
    loaded: bool = True  # a kernel module answered
    tool_version: Optional[str] = None  # nvidia-smi's own version when it differs (containers)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: Optional[str]  # "8.6"; None when unknown (see Facts.problems)
    memory_mib: Optional[int]
    source: str
    cc_source: Optional[str] = None  # "nvidia-smi --query-gpu", "nvml", "table:gpus.yaml"
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    mig: bool = False
    pci_device_id: Optional[str] = None  # "0x2204": a GPU is known by it when its name is not
    architecture: Optional[str] = None  # "Ampere" (nvidia-smi -q Product Architecture)


@dataclass(frozen=True)
class Host:
    os: Optional[str]  # "Ubuntu 22.04.4 LTS" (PRETTY_NAME) or "Windows" when assumed
    arch: str  # "x86_64"
    glibc: Optional[str]  # "2.35"
    wsl: bool
    container: Optional[str]  # "docker", "podman", "lxc", "kubernetes" or None
    sudo: bool  # running under sudo (SUDO_USER set): sudo strips LD_LIBRARY_PATH
    kernel: Optional[str] = None
    sudo_user: Optional[str] = None
    os_id: Optional[str] = None  # "ubuntu", "windows"
    source: str = "/etc/os-release"
    glibc_source: Optional[str] = None  # "confstr", "ldd --version", "override:flag", "override:env"
    tegra: Optional[str] = None  # a Jetson: "L4T R35.4.1; NVIDIA Jetson AGX Orin Developer Kit"
    tegra_source: Optional[str] = None  # "/etc/nv_tegra_release", "/proc/device-tree/model"


@dataclass(frozen=True)
class PythonInterp:
    path: str
    version: str  # "3.11.7"
    source: str  # "PATH", "pyenv", "conda:<env>", "override", "--python" (a path found nowhere else)

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class CudaInstall:
    """A CUDA toolkit or CUDA library found on the machine."""

    kind: str  # "toolkit" | "library" | "path-entry" | "ld-library-path-entry"
    path: str
    version: Optional[str]
    source: str  # "nvcc -V", "version.json", "ldconfig -p", "PATH", "LD_LIBRARY_PATH"
    name: Optional[str] = None  # library soname, e.g. "libcudnn.so.8"


@dataclass(frozen=True)
class Tools:
    conda: Optional[str] = None
    mamba: Optional[str] = None
    micromamba: Optional[str] = None
    uv: Optional[str] = None
    nvcc: Optional[str] = None
    nvidia_smi: Optional[str] = None


@dataclass(frozen=True)
class SourceTried:
    """One place the probe looked for the driver/GPUs, and what it found there (for "no GPU" reports)."""

    source: str  # "nvml", "nvidia-smi", "/proc/driver/nvidia/version", "lspci", ...
    outcome: str  # "driver 535.104.05, 2 GPUs" / "not found" / the error it gave


@dataclass(frozen=True)
class Facts:
    driver: Driver
    gpus: tuple[Gpu, ...]
    host: Host
    pythons: tuple[PythonInterp, ...] = ()
    cuda_installs: tuple[CudaInstall, ...] = ()
    tools: Tools = field(default_factory=Tools)
    cuda_visible_devices: Optional[str] = None
    ld_library_path: Optional[str] = None
    problems: tuple[Problem, ...] = ()
    gpu_on_pci: Optional[bool] = None  # lspci / sysfs saw an NVIDIA display device
    sources_tried: tuple[SourceTried, ...] = ()
    # no NVIDIA GPU: the other vendors' display devices sysfs lists ("AMD (1002:73bf) at 0000:03:00.0")
    other_gpus: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        """The probe JSON contract (keys documented in docs/reference/json-output.md: never rename)."""
        d = asdict(self)
        d["gpus"] = [asdict(g) for g in self.gpus]
        d["pythons"] = [asdict(p) for p in self.pythons]
        d["cuda_installs"] = [asdict(c) for c in self.cuda_installs]
        d["problems"] = [asdict(p) for p in self.problems]
        return d


@dataclass(frozen=True)
class AssumeFlags:
    """The what-if flags as given on the command line (--assume-*, --from-nvidia-smi)."""

    driver: Optional[str] = None
    gpus: tuple[str, ...] = ()
    python: Optional[str] = None
    glibc: Optional[str] = None
    nvidia_smi: Optional[str] = None  # a file, or "-" for stdin
