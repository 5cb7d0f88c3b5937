"""PCI device id -> NVIDIA GPU and compute capability (profiles/pci_ids.yaml).

A GPU whose printed name no table knows (a new SKU, an OEM string, a name cut short) still has a
PCI device id: `nvidia-smi -q` "Device Id" (0x220410DE), /sys/bus/pci/devices/*/device (0x2204),
`lspci -n` (10de:2204). The table is built by `scripts/gather_knowledge.py --pci-ids FILE` from
pci.ids (the PCI ID Repository, shipped by Debian's hwdata/pciutils as /usr/share/misc/pci.ids):
each NVIDIA device's bracketed marketing name is matched against gpus.yaml (whose rows carry
NVIDIA's published compute capabilities); a device named only by its chip ("GA102") gets the
chip's compute capability when every named device of that chip agrees on one. Nothing is guessed:
a device that neither way resolves is left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

from tfgpu_install.knowledge.gpu_names import match_gpu
from tfgpu_install.knowledge.model import GpuRow

NVIDIA_VENDOR = "10de"
FILE_NAME = "pci_ids.yaml"


@dataclass(frozen=True)
class PciDevice:
    """One NVIDIA PCI device line of pci.ids: "2204  GA102 [GeForce RTX 3090]"."""

    device_id: str  # four lower-case hex digits
    chip: str  # "GA102", "TU104GL", "GK210GL"
    names: tuple[str, ...]  # the bracketed names, split at " / " ("GeForce RTX 3080 Mobile / Max-Q")
    label: str = ""  # the whole text ("GA102 High Definition Audio Controller")


@dataclass(frozen=True)
class PciGpuEntry:
    device_id: str
    compute_capability: str
    chip: str
    name: str  # the first bracketed name, or the chip
    how: str  # "name" (a gpus.yaml row) | "chip" (every named device of the chip agrees)


_RE_DEVICE = re.compile(r"^\t([0-9a-fA-F]{4})\s+(.+?)\s*$")
# "GA102 [GeForce RTX 3090]"; newer entries also give the board code: "AD103M / GN21-X11 [GeForce RTX 4090 Laptop GPU]".
_RE_BRACKET = re.compile(r"^(\S+)(?:\s+/\s+\S+)*\s*\[(.+)\]\s*$")


def parse_pci_ids(text: str) -> list[PciDevice]:
    """The NVIDIA (vendor 10de) device lines of a pci.ids file. Subsystem lines are skipped."""
    out: list[PciDevice] = []
    inside = False
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if not line.startswith("\t"):
            inside = line.lower().startswith(NVIDIA_VENDOR + " ")
            continue
        if not inside or line.startswith("\t\t"):
            continue
        m = _RE_DEVICE.match(line)
        if not m:
            continue
        label = m.group(2)
        b = _RE_BRACKET.match(label)
        chip, names = (b.group(1), _split_names(b.group(2))) if b else (label.split()[0], ())
        out.append(PciDevice(m.group(1).lower(), chip, names, label))
    return out


def _split_names(bracket: str) -> tuple[str, ...]:
    """ "GeForce RTX 3080 Mobile / Max-Q 8GB/16GB" -> ("GeForce RTX 3080 Mobile", "GeForce RTX 3080 Max-Q 8GB/16GB")."""
    parts = [p.strip() for p in bracket.split(" / ") if p.strip()]
    if len(parts) < 2:
        return tuple(parts)
    first = parts[0]
    base = re.sub(r"\s+(?:Mobile|Max-Q|Laptop GPU|Notebook)\b.*$", "", first)
    # "... Mobile / Max-Q" names one model twice: the second half carries only the variant word.
    return (first,) + tuple(p if len(p.split()) > 2 else f"{base} {p}" for p in parts[1:])


def _chip_family(chip: str) -> str:
    """ "TU104GL" / "TU104M" / "TU104BM" -> "TU104": workstation/mobile variants of one die."""
    m = re.match(r"^([A-Z]{2}\d{2,3}[A-Z]?)(?:GL|M|BM|GLM|B)?$", chip)
    return m.group(1) if m else chip


def build_table(devices: Iterable[PciDevice], rows: tuple[GpuRow, ...]) -> list[PciGpuEntry]:
    """Each device's compute capability from its names (gpus.yaml), else from its chip family.

    The compute capability belongs to the die, and a marketing name was sometimes reused on
    another die (GTX 860M: GK104M and GM107M). So a chip family whose named devices agree by at
    least two thirds decides for all its devices, the odd name included; below that, only the
    devices whose own names resolve get a row.
    """
    devices = list(devices)
    by_name: dict[str, str] = {}
    votes: dict[str, dict[str, int]] = {}
    for d in devices:
        ccs = {r.compute_capability for r in (match_gpu(rows, n) for n in d.names) if r is not None}
        if len(ccs) == 1:
            cc = ccs.pop()
            by_name[d.device_id] = cc
            family = votes.setdefault(_chip_family(d.chip), {})
            family[cc] = family.get(cc, 0) + 1
    chip_cc: dict[str, str] = {}
    for chip, counts in votes.items():
        cc, n = max(counts.items(), key=lambda kv: kv[1])
        if 3 * n >= 2 * sum(counts.values()):
            chip_cc[chip] = cc
    out: list[PciGpuEntry] = []
    for d in devices:
        name = d.names[0] if d.names else d.chip
        family_cc = chip_cc.get(_chip_family(d.chip))
        own = by_name.get(d.device_id)
        if own is not None and own == family_cc:
            out.append(PciGpuEntry(d.device_id, own, d.chip, name, "name"))
        elif family_cc is not None and _is_gpu(d):
            out.append(PciGpuEntry(d.device_id, family_cc, d.chip, name, "chip"))
        elif own is not None and family_cc is None:  # the chip's names disagree: trust only the name
            out.append(PciGpuEntry(d.device_id, own, d.chip, name, "name"))
    return sorted(out, key=lambda e: e.device_id)


def _is_gpu(d: PciDevice) -> bool:
    """Audio/USB/bridge functions of a graphics card share its chip name but are not GPUs."""
    text = " ".join((d.label, *d.names)).lower()
    return not re.search(r"audio|usb|bridge|serial bus|controller|nvswitch|\bpcie?\b", text)


def render_table(entries: list[PciGpuEntry], source: str) -> str:
    """profiles/pci_ids.yaml: one flow row per device, compact enough to read in a diff."""
    lines = [
        "# PCI device id -> NVIDIA GPU and compute capability. Generated by",
        "#   python scripts/gather_knowledge.py --pci-ids /usr/share/misc/pci.ids",
        "# from pci.ids (its NVIDIA device names) and gpus.yaml (NVIDIA's published compute capabilities).",
        "# Row: id: [compute capability, chip, name, how]; how = name (a gpus.yaml model) or chip (every",
        "# named device of the same chip has this compute capability). Do not edit by hand: regenerate.",
        "format: 1",
        f"source: {_quote(source)}",
        "devices:",
    ]
    for e in entries:
        lines.append(f'  "{e.device_id}": ["{e.compute_capability}", {_quote(e.chip)}, {_quote(e.name)}, {e.how}]')
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------- lookup


@dataclass(frozen=True)
class PciTable:
    entries: dict[str, PciGpuEntry]
    source: str


def normalise_device_id(raw: Optional[str]) -> Optional[str]:
    """ "0x220410DE" (nvidia-smi -q: device then vendor), "0x2204" (sysfs), "10de:2204" (lspci) -> "2204"."""
    if not raw:
        return None
    s = raw.strip().lower()
    m = re.fullmatch(r"(?:0x)?([0-9a-f]{4})10de", s) or re.fullmatch(r"(?:10de:)?(?:0x)?([0-9a-f]{4})", s)
    return m.group(1) if m else None


@lru_cache(maxsize=4)
def load_pci_table(path: Path) -> PciTable:
    """The table at path; an absent or unreadable file gives an empty table (lookups then miss)."""
    import yaml

    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return PciTable({}, "")
    rows = data.get("devices") if isinstance(data, dict) else None
    entries: dict[str, PciGpuEntry] = {}
    for dev, row in (rows or {}).items():
        if isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row):
            entries[str(dev).lower()] = PciGpuEntry(str(dev).lower(), row[0], row[1], row[2], row[3])
    return PciTable(entries, str(data.get("source", "")) if isinstance(data, dict) else "")


def lookup_pci(table: PciTable, raw_device_id: Optional[str]) -> Optional[PciGpuEntry]:
    dev = normalise_device_id(raw_device_id)
    return table.entries.get(dev) if dev else None
