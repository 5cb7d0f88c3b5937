"""What nvidia-smi outputs are read into: plain frozen data, the reading states, and small helpers
shared by the parsers (tfgpu_install/facts/gpu.py: table, -q, failures; tfgpu_install/facts/smi_query.py: CSV, -L)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# The fields we ask `nvidia-smi --query-gpu` for. Drivers before ~R510 reject compute_cap.
QUERY_FIELDS: tuple[str, ...] = (
    "index", "name", "uuid", "pci.bus_id", "driver_version", "compute_cap", "memory.total",
)
QUERY_FIELDS_OLD: tuple[str, ...] = tuple(f for f in QUERY_FIELDS if f != "compute_cap")

# States of one nvidia-smi reading.
OK = "ok"
NO_DEVICES = "no-devices"  # "No devices were found"
NO_DRIVER = "no-driver"  # "couldn't communicate with the NVIDIA driver", NVRM probe failures
VERSION_MISMATCH = "version-mismatch"  # "Driver/library version mismatch": upgraded, not rebooted
NVML_FAILED = "nvml-failed"  # other "Failed to initialize NVML: ..." (containers, WSL2 blocked)
NOT_INSTALLED = "not-installed"  # "nvidia-smi: command not found"
NVML_MISSING = "nvml-missing"  # "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system"
UNRECOGNIZED = "unrecognized"  # nothing we know how to read
GPU_LOST = "gpu-lost"  # "GPU is lost" / "Unable to determine the device handle": fell off the bus (Xid 79)

_NA = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]", "ERR!", "[ERR!]"}


@dataclass(frozen=True)
class SmiGpu:
    index: Optional[int]
    name: Optional[str]
    name_truncated: bool = False  # the table cuts long names ("NVIDIA GeForce RTX 3060 ...")
    bus_id: Optional[str] = None
    memory_mib: Optional[int] = None
    compute_capability: Optional[str] = None
    uuid: Optional[str] = None
    driver_version: Optional[str] = None
    mig_mode: Optional[str] = None  # "Enabled" / "Disabled" where printed
    pci_device_id: Optional[str] = None  # -q "Device Id" / query pci.device_id: "0x220410DE"
    architecture: Optional[str] = None  # -q "Product Architecture" (R470+): "Ampere"


@dataclass(frozen=True)
class MigDevice:
    gpu: int
    gi: Optional[int]
    ci: Optional[int]
    mig_dev: int
    memory_mib: int


@dataclass(frozen=True)
class SmiReading:
    """What one nvidia-smi output (table, -q, CSV or failure text, or several joined) says."""

    state: str
    driver_version: Optional[str] = None
    tool_version: Optional[str] = None  # "NVIDIA-SMI x": differs from the driver in containers/WSL2
    cuda_version: Optional[str] = None  # only when the field holds a version
    cuda_field: str = "absent"  # "absent" (pre-R410) | "ok" | "error" ("ERR!", "N/A")
    cuda_raw: Optional[str] = None  # the field as printed
    cuda_label: Optional[str] = None  # "CUDA Version" | "CUDA UMD Version"
    gpus: tuple[SmiGpu, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()
    gpu_count: Optional[int] = None  # "Attached GPUs" (-q)
    message: Optional[str] = None  # the failure line, as printed
    nvml_library_version: Optional[str] = None  # printed with a version mismatch
    formats: tuple[str, ...] = ()  # what was recognized: table, query-csv, -q, failure, nvrm-log
    invalid_field: Optional[str] = None  # 'Field "compute_cap" is not a valid field to query.'
    module_version: Optional[str] = None  # an "NVRM version:" line pasted along (/proc/driver/nvidia/version)

    @property
    def tool_differs(self) -> bool:
        return bool(self.tool_version and self.driver_version and self.tool_version != self.driver_version)


def _int(text: str) -> Optional[int]:
    try:
        return int(text)
    except ValueError:
        return None


def _clean_name(raw: str) -> tuple[str, bool]:
    name = raw.strip()
    for tail in ("...", "\u2026"):
        if name.endswith(tail):
            return name[: -len(tail)].rstrip(), True
    return name, False


def _none(value: str) -> Optional[str]:
    v = value.strip()
    return None if v in _NA else v
