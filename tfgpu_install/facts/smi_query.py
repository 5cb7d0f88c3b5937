"""`nvidia-smi --query-gpu` CSV (with a header in any column order, or noheader after a pasted command
line naming the fields, or printed as a Python list) and `nvidia-smi -L`. Pure; never raise."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from tfgpu_install.facts.devices import is_version
from tfgpu_install.facts.smi_model import QUERY_FIELDS, SmiGpu, _clean_name, _int, _none

_RE_CSV_HEADER = re.compile(r"^[a-z_.]+(?: \[[^\]]+\])?(?:, *[a-z_.]+(?: \[[^\]]+\])?)*$")
# Fields that identify a GPU: a CSV header must name one of them (prose never looks like this).
_ID_FIELDS = set(QUERY_FIELDS) | {"gpu_name", "gpu_uuid", "gpu_bus_id", "pci.device_id"}
_KNOWN_QUERY_FIELDS = _ID_FIELDS | {
    "count", "memory.used", "memory.free", "compute_mode", "pstate", "timestamp", "serial", "gpu_serial",
    "vbios_version", "persistence_mode", "display_mode", "display_active", "accounting.mode", "power.draw",
    "power.limit", "temperature.gpu", "utilization.gpu", "utilization.memory", "fan.speed", "inforom.img",
}
_FIELD_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
_RE_QUERY_ARG = re.compile(r"--query-gpu[= ]['\"]?([A-Za-z_.,]+)")
_RE_LIST_LINE = re.compile(r"^\s*(?:[\w.\[\]]+\s*=\s*)?(\[\s*[bBuU]?['\"].*\]|[bB]['\"].*['\"])\s*$")
# The closing ")" may be cut off with the end of a pasted line; a UUID cut short is not kept.
_RE_L_GPU = re.compile(r"^\s*GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]*)\)?\s*$")
_RE_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# A header-less `--query-gpu=name,pci.device_id` (either order): NVIDIA's vendor id 10DE ends the id.
_RE_NVIDIA_DEVID = re.compile(r"0x[0-9A-Fa-f]{4}10[dD][eE]")
_RE_L_MIG = re.compile(r"^\s+MIG \S+\s+Device\s+\d+: \(UUID: MIG-")


def parse_query_gpu(text: str, fields: Sequence[str] = QUERY_FIELDS) -> tuple[tuple[SmiGpu, ...], Optional[str]]:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`.

    Returns (gpus, invalid_field). A header line (csv without noheader) is skipped.
    """
    invalid = re.search(r'Field "([^"]+)" is not a valid field to query', text)
    if invalid:
        return (), invalid.group(1)
    fields = tuple(fields)
    gpus: list[SmiGpu] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or _is_csv_header(s):
            continue
        cells = [c.strip() for c in s.split(",")]
        if len(cells) < len(fields):
            continue
        if len(cells) > len(fields) and "name" in fields:
            # A comma inside the name: glue the surplus back into it.
            i = fields.index("name")
            extra = len(cells) - len(fields)
            cells = cells[:i] + [", ".join(cells[i : i + extra + 1])] + cells[i + extra + 1 :]
        row = dict(zip(fields, cells))
        index = _int(row.get("index", "")) if "index" in row else len(gpus)
        mem_text = (row.get("memory.total") or "").replace("MiB", "").strip()
        cc = _none(row.get("compute_cap", ""))
        dev_id = _none(row.get("pci.device_id", ""))
        drv = _none(row.get("driver_version", ""))
        name = _none(row.get("name", ""))
        if "index" in row and index is None or len(cells) != len(fields):
            continue  # not a data row (a prompt line, a message)
        gpu = SmiGpu(
            index=index,
            name=name,
            uuid=_none(row.get("uuid", "")),
            bus_id=_none(row.get("pci.bus_id", "")),
            driver_version=drv if is_version(drv) else None,
            compute_capability=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
            memory_mib=_int(mem_text) if mem_text else None,
            pci_device_id=dev_id if dev_id and re.fullmatch(r"0x[0-9A-Fa-f]{4,8}", dev_id) else None,
        )
        if not any((gpu.name, gpu.uuid, gpu.bus_id, gpu.driver_version, gpu.compute_capability, gpu.memory_mib)):
            continue
        gpus.append(gpu)
    return tuple(gpus), None


def _header_fields(line: str) -> Optional[list[str]]:
    """The field names of a `--format=csv` header line ("name, compute_cap [X]"), else None."""
    if not _RE_CSV_HEADER.match(line):
        return None
    names = [n.split(" [")[0].strip() for n in line.split(",")]
    if not any(n in _ID_FIELDS for n in names):
        return None
    if not all(n in _KNOWN_QUERY_FIELDS or "." in n for n in names):
        return None
    return [_FIELD_ALIASES.get(n, n) for n in names]


def _is_csv_header(line: str) -> bool:
    return _header_fields(line) is not None


def _unlist(text: str) -> str:
    """Python-list / bytes pastes of CSV output (`print(out.split("\\n"))`, `b'0, Tesla T4\\n'`) as lines."""
    if "[" not in text and "b'" not in text and 'b"' not in text:
        return text
    import ast

    out: list[str] = []
    for line in text.splitlines():
        head = line.lstrip()[:2]
        if not (head[:1] == "[" or head in ("b'", 'b"', "B'", 'B"') or "= [" in line):
            out.append(line)  # the cheap test first: most lines of a long log are not list reprs
            continue
        m = _RE_LIST_LINE.match(line) if len(line) < 100_000 else None
        if m is None:
            out.append(line)
            continue
        try:
            value = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out.append(line)
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, bytes):
                item = item.decode("utf-8", "replace")
            if isinstance(item, str):
                out.extend(item.splitlines())
    return "\n".join(out)


def _block_after(lines: list[str], i: int) -> list[str]:
    """The CSV lines from i on: up to a blank line or the next shell prompt."""
    block: list[str] = []
    while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(("$", "#", ">")):
        block.append(lines[i])
        i += 1
    return block


def _csv_blocks(text: str) -> list[SmiGpu]:
    """`--query-gpu` CSV inside free text: with a header (any column order), or without one
    (noheader) after a pasted command line naming the fields, in the printed or a Python-list form."""
    text = _unlist(text)
    out: list[SmiGpu] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if "," not in s and s not in _ID_FIELDS and "--query-gpu" not in s:
            i += 1  # neither a header nor a command line naming the fields
            continue
        fields = _header_fields(s)
        query = _RE_QUERY_ARG.search(s) if "--query-gpu" in s else None
        if fields:
            block = _block_after(lines, i + 1)
        elif query and "noheader" in s:
            fields = [_FIELD_ALIASES.get(f, f) for f in query.group(1).split(",") if f]
            block = _block_after(lines, i + 1)
        else:
            i += 1
            continue
        gpus, _ = parse_query_gpu("\n".join(block), fields)
        out.extend(gpus)
        i += 1 + len(block)
    return out


def parse_smi_list(text: str) -> tuple[SmiGpu, ...]:
    """`nvidia-smi -L`: "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)", then its MIG devices."""
    gpus: list[SmiGpu] = []
    for line in text.splitlines():
        if "UUID:" not in line:
            continue
        m = _RE_L_GPU.match(line)
        if m:
            name, truncated = _clean_name(m.group(2))
            uuid = m.group(3) if _RE_UUID.fullmatch(m.group(3)) else None
            gpus.append(SmiGpu(index=int(m.group(1)), name=name, name_truncated=truncated, uuid=uuid))
        elif gpus and _RE_L_MIG.match(line):
            gpus[-1] = SmiGpu(**{**gpus[-1].__dict__, "mig_mode": "Enabled"})
    return tuple(gpus)


def _name_and_id(line: str) -> Optional[tuple[str, str]]:
    cells = [c.strip() for c in line.strip().split(",")]
    if len(cells) != 2:
        return None
    ids = [c for c in cells if _RE_NVIDIA_DEVID.fullmatch(c)]
    names = [c for c in cells if c not in ids and c and not c.lower().startswith("0x")]
    if len(ids) != 1 or len(names) != 1:
        return None
    return names[0], ids[0]


def parse_name_device_id(text: str) -> tuple[SmiGpu, ...]:
    """Header-less CSV of name + PCI device id ("NVIDIA GB10, 0x2E1210DE"), in either column order:
    consecutive lines of exactly that shape, numbered as printed."""
    gpus: list[SmiGpu] = []
    for line in text.splitlines():
        if "0x" not in line or "," not in line:
            continue
        pair = _name_and_id(line)
        if pair is None:
            continue
        name, truncated = _clean_name(pair[0])
        gpus.append(SmiGpu(index=len(gpus), name=name, name_truncated=truncated, pci_device_id=pair[1]))
    return tuple(gpus)
