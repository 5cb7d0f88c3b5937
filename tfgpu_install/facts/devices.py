"""Pure parsers for what the kernel and the PCI bus say about NVIDIA hardware. Never raise.

/proc/driver/nvidia/version and /sys/module/nvidia/version (the loaded kernel module) and
`lspci -nn` (a GPU that is present even when no driver answers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_VERSION = r"\d+(?:\.\d+)+"


def is_version(text: Optional[str]) -> bool:
    return bool(text) and re.fullmatch(_VERSION, text or "") is not None


# ---------------------------------------------------------------- kernel module


def parse_proc_driver_version(text: str) -> Optional[str]:
    """The loaded kernel module's version from /proc/driver/nvidia/version.

    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." and the open
    module's "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ...".
    """
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("NVRM version:"):
            rest = line.split("Module", 1)[-1]
            m = re.search(r"(?<![\w.])(\d+\.\d+(?:\.\d+)?)(?![\w.])", rest)
            return m.group(1) if m else None
    return None


def parse_sys_module_version(text: str) -> Optional[str]:
    """/sys/module/nvidia/version: the version alone on one line."""
    s = text.strip()
    return s if is_version(s) else None


# ---------------------------------------------------------------- lspci


@dataclass(frozen=True)
class PciGpu:
    slot: str  # "01:00.0"
    device_class: str  # "VGA compatible controller" / "3D controller"
    description: str  # "NVIDIA Corporation GA102 [GeForce RTX 3090]"
    device_id: Optional[str]  # "2204" (from -nn)
    name: Optional[str]  # the marketing name in brackets, when lspci knows it


_RE_LSPCI = re.compile(
    r"^(?P<slot>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+"
    r"(?P<cls>[^:\[]+?)(?:\s*\[(?P<code>[0-9a-fA-F]{4})\])?:\s*(?P<desc>.*)$"
)


def parse_lspci(text: str) -> tuple[PciGpu, ...]:
    """NVIDIA display devices (VGA [0300], 3D [0302], display [0380]) in `lspci -nn`, `lspci -n` or plain lspci."""
    out: list[PciGpu] = []
    for line in text.splitlines():
        m = _RE_LSPCI.match(line.strip())
        if not m:
            continue
        cls, code, desc = m.group("cls").strip(), m.group("code"), m.group("desc")
        if code is None and re.fullmatch(r"[0-9a-fA-F]{4}", cls):
            code = cls  # `lspci -n`: "01:00.0 0300: 10de:2204 (rev a1)", numbers only
            desc = re.sub(r"^([0-9a-fA-F]{4}:[0-9a-fA-F]{4})", r"[\1]", desc.strip())
        is_display = code in ("0300", "0302", "0380") if code else any(
            k in cls for k in ("VGA compatible controller", "3D controller", "Display controller")
        )
        ids = re.search(r"\[10de:([0-9a-fA-F]{4})\]", desc)
        if not is_display or not (ids or "NVIDIA" in desc):
            continue
        names = [n for n in re.findall(r"\[([^\]]+)\]", desc) if not re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}", n)]
        desc_clean = re.sub(r"\s*\[10de:[0-9a-fA-F]{4}\]", "", desc)
        desc_clean = re.sub(r"\s*\(rev [0-9a-fA-F]+\)", "", desc_clean).strip()
        out.append(
            PciGpu(
                slot=m.group("slot"),
                device_class=cls,
                description=desc_clean,
                device_id=ids.group(1).lower() if ids else None,
                name=names[-1] if names else None,
            )
        )
    return tuple(out)


def cuda_from_int(value: object) -> Optional[str]:
    """NVML/cudaDriverGetVersion's integer (12020) as "12.2"."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"
