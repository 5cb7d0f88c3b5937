"""Pure parsers for what NVIDIA's tools print. Each takes text and never raises.

Covers the default `nvidia-smi` table in every header format since R3xx (no CUDA field
before R410; "CUDA Version: 12.2"; "CUDA Version: ERR!" on WSL2; the R610 relabel
"KMD Version" / "CUDA UMD Version"; a tool version that differs from the driver inside
containers and WSL2), `--query-gpu` CSV, `nvidia-smi -q`, the failure messages,
/proc/driver/nvidia/version, /sys/module/nvidia/version and `lspci -nn`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# Re-exported: callers read every NVIDIA text format from this module.
from tfgpu_install.facts.devices import _VERSION
from tfgpu_install.facts.devices import PciGpu as PciGpu
from tfgpu_install.facts.devices import cuda_from_int as cuda_from_int
from tfgpu_install.facts.devices import is_version as is_version
from tfgpu_install.facts.devices import parse_lspci as parse_lspci
from tfgpu_install.facts.devices import parse_proc_driver_version as parse_proc_driver_version
from tfgpu_install.facts.devices import parse_sys_module_version as parse_sys_module_version
from tfgpu_install.facts.smi_model import GPU_LOST as GPU_LOST
from tfgpu_install.facts.smi_model import NO_DEVICES as NO_DEVICES
from tfgpu_install.facts.smi_model import NO_DRIVER as NO_DRIVER
from tfgpu_install.facts.smi_model import NOT_INSTALLED as NOT_INSTALLED
from tfgpu_install.facts.smi_model import NVML_FAILED as NVML_FAILED
from tfgpu_install.facts.smi_model import NVML_MISSING as NVML_MISSING
from tfgpu_install.facts.smi_model import OK as OK
from tfgpu_install.facts.smi_model import QUERY_FIELDS as QUERY_FIELDS
from tfgpu_install.facts.smi_model import QUERY_FIELDS_OLD as QUERY_FIELDS_OLD
from tfgpu_install.facts.smi_model import UNRECOGNIZED as UNRECOGNIZED
from tfgpu_install.facts.smi_model import VERSION_MISMATCH as VERSION_MISMATCH
from tfgpu_install.facts.smi_model import MigDevice as MigDevice
from tfgpu_install.facts.smi_model import SmiGpu as SmiGpu
from tfgpu_install.facts.smi_model import SmiReading as SmiReading
from tfgpu_install.facts.smi_model import _clean_name, _int, _none
from tfgpu_install.facts.smi_query import _csv_blocks
from tfgpu_install.facts.smi_query import parse_name_device_id as parse_name_device_id
from tfgpu_install.facts.smi_query import parse_query_gpu as parse_query_gpu
from tfgpu_install.facts.smi_query import parse_smi_list as parse_smi_list

__all__ = [
    "PciGpu", "cuda_from_int", "is_version", "parse_lspci", "parse_proc_driver_version", "parse_sys_module_version",
    "SmiGpu", "MigDevice", "SmiReading", "parse_nvidia_smi", "parse_smi_table", "parse_smi_q", "parse_query_gpu",
    "parse_smi_failure", "parse_smi_list", "QUERY_FIELDS", "QUERY_FIELDS_OLD",
]

_RE_TOOL = re.compile(r"NVIDIA-SMI\s+(" + _VERSION + r")")
# "Driver Version" until R610, "KMD Version" after; table uses "X: v", -q uses "X   : v".
_RE_DRIVER = re.compile(r"(?:Driver|KMD) Version\s*:\s*(\S+)")
_RE_CUDA = re.compile(r"CUDA( UMD)? Version\s*:\s*([^\s|]+)")
_RE_GPU_ROW = re.compile(
    r"^\|\s*(\d+)\s+(.*?)\s+(On|Off|N/A|WDDM|TCC)\s*\|"
    r"(?:\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]))?"
)
_RE_MEM = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_RE_MIG_ROW = re.compile(
    r"^\|\s*(\d+)\s+(\d+|N/A)\s+(\d+|N/A)\s+(\d+)\s*\|\s*(\d+)\s*MiB\s*/\s*(\d+)\s*MiB"
)
_RE_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_RE_ATTACHED = re.compile(r"^\s*Attached GPUs\s*:\s*(\d+)")
_RE_Q_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_RE_Q_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")
_RE_NVML_LIB = re.compile(r"NVML library version:\s*(" + _VERSION + r")")


# ---------------------------------------------------------------- failures


# What each failure prints (lower case). Found with str.find on the lower-cased text: a case-insensitive
# regex alternation took seconds on a 50 MB log.
_FAILURE_NEEDLES = (
    "no devices were found", "couldn't communicate with the nvidia driver",
    "could not communicate with the nvidia driver",
    "driver/library version mismatch", "failed to initialize nvml", "nvidia-smi: command not found",
    "nvidia-smi: not found", "gpu is lost", "unable to determine the device handle for gpu",
    "couldn't find libnvidia-ml.so", "could not find libnvidia-ml.so",
)
# Pastes through chat and word processors turn the apostrophe typographic ("couldn‘t", "couldn’t"):
# one character for one, so positions found in the folded text hold in the original.
_APOSTROPHES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u00b4": "'", "`": "'"})


def _fold(text: str) -> str:
    return text.lower().translate(_APOSTROPHES)

_NVRM_FAILURES = ("probe routine was not called", "no nvidia graphics adapter probed", "no nvidia gpu found",
                  "rminitadapter failed")


def _line_around(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end != -1 else len(text)].strip()


def _first_failure_line(text: str) -> Optional[str]:
    """The earliest line holding a known failure (a "failed to initialize nvml" only at a line start)."""
    low = _fold(text)
    best = -1
    for needle in _FAILURE_NEEDLES:
        pos = low.find(needle)
        while pos != -1 and needle == "failed to initialize nvml" and not _line_around(low, pos).startswith(needle):
            pos = low.find(needle, pos + 1)
        if pos != -1 and (best == -1 or pos < best):
            best = pos
    pos = low.find("nvrm:")
    while pos != -1 and (best == -1 or pos < best):
        if any(f in _line_around(low, pos) for f in _NVRM_FAILURES):
            best = pos
            break
        pos = low.find("nvrm:", pos + 1)
    return _line_around(text, best) if best != -1 else None


def parse_smi_failure(text: str) -> Optional[tuple[str, str]]:
    """(state, message) when the text holds a known nvidia-smi / NVRM failure, else None.

    The earliest failure line counts. Each state names its cause: NO_DRIVER = the kernel module is
    not loaded (or not reachable: a container without --gpus), not an unreadable file.
    """
    s = _first_failure_line(text)
    if s is None:
        return None
    low = _fold(s)
    if "libnvidia-ml.so" in low:
        return NVML_MISSING, s
    if "no devices were found" in low:
        return NO_DEVICES, s
    if "communicate with the nvidia driver" in low or "nvrm:" in low:
        return NO_DRIVER, s
    if "driver/library version mismatch" in low:
        return VERSION_MISMATCH, s
    if "gpu is lost" in low or "unable to determine the device handle" in low:
        return GPU_LOST, s
    if "not found" in low and "nvidia-smi" in low:
        return NOT_INSTALLED, s
    return NVML_FAILED, s


# ---------------------------------------------------------------- header


def _parse_header(text: str) -> dict[str, Optional[str]]:
    out: dict[str, Optional[str]] = {}
    m = _RE_TOOL.search(text)
    if m:
        out["tool_version"] = m.group(1)
    for m in _RE_DRIVER.finditer(text):
        if is_version(m.group(1)):
            out["driver_version"] = m.group(1)
            break
    # R610+ -q may print both the deprecated "CUDA Version" and "CUDA UMD Version": prefer UMD.
    found = list(_RE_CUDA.finditer(text))
    found.sort(key=lambda m: 0 if m.group(1) else 1)
    if found:
        m = found[0]
        raw = m.group(2)
        out["cuda_label"] = "CUDA UMD Version" if m.group(1) else "CUDA Version"
        out["cuda_raw"] = raw
        if is_version(raw):
            out["cuda_version"] = raw
    return out


# ---------------------------------------------------------------- default table


def parse_smi_table(text: str) -> tuple[tuple[SmiGpu, ...], tuple[MigDevice, ...]]:
    """GPU rows and MIG rows of the default table. Stops reading GPU rows at "Processes:"."""
    gpus: list[SmiGpu] = []
    migs: list[MigDevice] = []
    section = "gpus"
    for line in text.splitlines():
        if "|" not in line:
            continue  # every table line has one: a 50 MB log is mostly other lines
        s = _RE_QUOTE.sub("", line).strip()  # a table pasted as a "> " quote still reads
        if "Processes:" in s:
            section = "processes"
            continue
        if "MIG devices:" in s:
            section = "mig"
            continue
        if section == "mig":
            m = _RE_MIG_ROW.match(s)
            if m:
                migs.append(
                    MigDevice(
                        gpu=int(m.group(1)),
                        gi=_int(m.group(2)),
                        ci=_int(m.group(3)),
                        mig_dev=int(m.group(4)),
                        memory_mib=int(m.group(6)),
                    )
                )
            continue
        if section != "gpus":
            continue
        m = _RE_GPU_ROW.match(s)
        if m and m.group(2).strip():
            name, truncated = _clean_name(m.group(2))
            gpus.append(SmiGpu(index=int(m.group(1)), name=name, name_truncated=truncated, bus_id=m.group(4)))
            continue
        mm = _RE_MEM.search(s)
        if mm and gpus and gpus[-1].memory_mib is None:
            last = gpus[-1]
            gpus[-1] = SmiGpu(**{**last.__dict__, "memory_mib": int(mm.group(2))})
        elif gpus and s.startswith("|") and gpus[-1].mig_mode is None:
            # Third row of a block (R450+): only the last cell, the MIG mode.
            cells = [c.strip() for c in s.strip("|").split("|")]
            if len(cells) >= 2 and not any(cells[:-1]) and cells[-1] in ("Enabled", "Disabled"):
                gpus[-1] = SmiGpu(**{**gpus[-1].__dict__, "mig_mode": cells[-1]})
    return tuple(gpus), tuple(migs)


# ---------------------------------------------------------------- nvidia-smi -q


def parse_smi_q(text: str) -> tuple[tuple[SmiGpu, ...], Optional[int]]:
    """GPU blocks of `nvidia-smi -q` and its "Attached GPUs" count."""
    gpus: list[dict[str, object]] = []
    attached: Optional[int] = None
    section: list[tuple[int, str]] = []  # (indent, key) of open sub-sections
    for line in text.splitlines():
        m = _RE_ATTACHED.match(line)
        if m:
            attached = int(m.group(1))
            continue
        m = _RE_Q_GPU.match(line.strip())
        if m and not line.startswith(" "):
            gpus.append({"index": len(gpus), "bus_id": m.group(1)})
            section = []
            continue
        if not gpus:
            continue
        kv = _RE_Q_KV.match(line)
        if not kv:
            key = line.strip()
            if key:
                indent = len(line) - len(line.lstrip())
                section = [(i, k) for i, k in section if i < indent] + [(indent, key)]
            continue
        indent = len(kv.group(1))
        key, value = kv.group(2).strip(), kv.group(3)
        section = [(i, k) for i, k in section if i < indent]
        parent = section[-1][1] if section else ""
        g = gpus[-1]
        if key == "Product Name" and not parent:
            name, trunc = _clean_name(value)
            g["name"], g["name_truncated"] = name, trunc
        elif key == "GPU UUID":
            g["uuid"] = _none(value)
        elif key == "Total" and parent == "FB Memory Usage":
            mm = re.match(r"(\d+)\s*MiB", value)
            if mm:
                g["memory_mib"] = int(mm.group(1))
        elif key == "Current" and parent == "MIG Mode":
            g["mig_mode"] = _none(value)
        elif key == "Device Id" and parent == "PCI":
            g["pci_device_id"] = _none(value)
        elif key == "Product Architecture" and not parent:
            g["architecture"] = _none(value)
        elif key == "Minor Number" and not parent:
            pass
    out = tuple(
        SmiGpu(
            index=int(str(g["index"])),
            name=g.get("name"),  # type: ignore[arg-type]
            name_truncated=bool(g.get("name_truncated", False)),
            bus_id=g.get("bus_id"),  # type: ignore[arg-type]
            memory_mib=g.get("memory_mib"),  # type: ignore[arg-type]
            uuid=g.get("uuid"),  # type: ignore[arg-type]
            mig_mode=g.get("mig_mode"),  # type: ignore[arg-type]
            pci_device_id=g.get("pci_device_id"),  # type: ignore[arg-type]
            architecture=g.get("architecture"),  # type: ignore[arg-type]
        )
        for g in gpus
    )
    return out, attached


# ---------------------------------------------------------------- any text


def parse_nvidia_smi(text: str) -> SmiReading:
    """Read any nvidia-smi output (default table, -q, CSV with header, failure text), or
    several pasted together (a saved file, a colleague's paste). Never raises."""
    try:
        return _parse_nvidia_smi(text if isinstance(text, str) else "")
    except Exception as exc:  # noqa: BLE001 - a parser bug must not take the probe down: recorded, unrecognized
        return SmiReading(state=UNRECOGNIZED,
                          message=f"nvidia-smi output could not be read ({type(exc).__name__}: {exc})")


@dataclass(frozen=True)
class _Found:
    """What phase one recognised in the text, before the GPUs are merged."""

    header: dict[str, Optional[str]]
    formats: tuple[str, ...]
    table_gpus: tuple[SmiGpu, ...]
    migs: tuple[MigDevice, ...]
    q_gpus: tuple[SmiGpu, ...]
    attached: Optional[int]
    csv_gpus: tuple[SmiGpu, ...]
    failure: Optional[tuple[str, str]]


def _looks_like_q(text: str) -> bool:
    return "NVSMI LOG" in text or bool(_RE_ATTACHED.search(text)) or (
        "Product Name" in text and bool(re.search(r"^\s*Product Name\s*:", text, re.M)))


def _recognise(text: str) -> _Found:
    """Phase one: every format found in the text, each read on its own."""
    header = _parse_header(text)
    formats: list[str] = []
    table_gpus, migs = parse_smi_table(text)
    if table_gpus or migs or ("NVIDIA-SMI" in text and header.get("driver_version")):
        formats.append("table")
    q_gpus: tuple[SmiGpu, ...] = ()
    attached: Optional[int] = None
    if _looks_like_q(text):
        q_gpus, attached = parse_smi_q(text)
        formats.append("-q")
    csv_gpus = tuple(_csv_blocks(text))
    list_gpus = parse_smi_list(text) if "UUID: GPU-" in text else ()
    if list_gpus:
        formats.append("-L")
        csv_gpus = csv_gpus or list_gpus
    if not csv_gpus:
        csv_gpus = parse_name_device_id(text)
    if csv_gpus:
        formats.append("query-csv")
    failure = parse_smi_failure(text)
    if failure:
        formats.append("nvrm-log" if "NVRM:" in failure[1] else "failure")
    return _Found(header, tuple(formats), table_gpus, migs, q_gpus, attached, csv_gpus, failure)


def _merge_one(g: SmiGpu, c: SmiGpu) -> SmiGpu:
    return SmiGpu(
        **{
            **g.__dict__,
            "compute_capability": g.compute_capability or c.compute_capability,
            "uuid": g.uuid or c.uuid,
            "pci_device_id": g.pci_device_id or c.pci_device_id,
            "memory_mib": g.memory_mib or c.memory_mib,
            "name": c.name if (c.name and (g.name_truncated or not g.name)) else g.name,
            "name_truncated": g.name_truncated and not c.name,
        }
    )


def _merge_gpus(found: _Found) -> list[SmiGpu]:
    """Phase two: the source with full names first (-q, then table); CSV adds compute capability."""
    gpus: list[SmiGpu] = list(found.q_gpus or found.table_gpus)
    csv = found.csv_gpus
    if not csv:
        return gpus
    if not gpus:
        return list(csv)
    return [_merge_one(g, csv[i]) if i < len(csv) else g for i, g in enumerate(gpus)]


def _driver_of(found: _Found) -> Optional[str]:
    driver = found.header.get("driver_version")
    if driver is None:
        drvs = [g.driver_version for g in found.csv_gpus if g.driver_version]
        driver = drvs[0] if drvs else None
    return driver


def _parse_nvidia_smi(text: str) -> SmiReading:
    found = _recognise(text)
    invalid = re.search(r'Field "([^"]+)" is not a valid field to query', text)
    module = parse_proc_driver_version(text)
    driver = _driver_of(found)
    if not found.formats and not driver:
        return SmiReading(state=UNRECOGNIZED, invalid_field=invalid.group(1) if invalid else None,
                          module_version=module)
    gpus = _merge_gpus(found)
    failure = found.failure
    nvml_lib = _RE_NVML_LIB.search(text)
    header = found.header
    raw = header.get("cuda_raw")
    return SmiReading(
        state=failure[0] if failure and not gpus else OK,
        driver_version=driver,
        tool_version=header.get("tool_version"),
        cuda_version=header.get("cuda_version"),
        cuda_field="absent" if raw is None else ("ok" if header.get("cuda_version") else "error"),
        cuda_raw=raw,
        cuda_label=header.get("cuda_label"),
        gpus=tuple(gpus),
        mig_devices=found.migs,
        gpu_count=found.attached,
        message=failure[1] if failure else None,
        nvml_library_version=nvml_lib.group(1) if nvml_lib else None,
        formats=found.formats,
        invalid_field=invalid.group(1) if invalid else None,
        module_version=module,
    )
