"""Match a GPU name as nvidia-smi/NVML print it to a row of gpus.yaml.

nvidia-smi has spelled the same part many ways across driver generations:
"Tesla K80", "GeForce GTX 1080 Ti", "NVIDIA GeForce RTX 3090", "NVIDIA A100-SXM4-40GB",
"NVIDIA H100 80GB HBM3", "Tesla V100-PCIE-16GB", "NVIDIA GeForce RTX 3060 Laptop GPU",
and the default table cuts long names ("GeForce RTX 208...").  We normalise case and
separators, drop the vendor word, strip memory / form-factor / mobile suffixes one at a
time, and for a truncated name accept a prefix match only when every candidate has the
same compute capability.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Optional

from tfgpu_install.knowledge.model import GpuRow, Knowledge

# Suffixes that do not change the compute capability, stripped from the end of a name.
# " D" / " D v2": the China-market models ("RTX 4090 D") share their base model's chip family and
# compute capability; "Lite Hash Rate"/LHR is a firmware limit; "with Max-Q Design" a power profile.
_SUFFIXES = re.compile(
    r"(?:\s(?:\d+\s?gb|sxm\d?|pcie|pci e|nvl|hbm\d?e?|mig.*|laptop gpu|laptop|mobile|notebook|"
    r"with max q design|with max-q design|max-q|max q|oem|\(.*\)|dgx.*|\d+w|d|v\d|lhr|lite hash rate|"
    r"founders edition|active|passive|\d+\s?gb/\d+\s?gb))$"
)
_TRUNCATED = re.compile(r"(\.\.\.|…)\s*$")


def normalise(name: str) -> str:
    """Lower case, '-'/'_' as spaces, one space, no 'NVIDIA' word, no trailing notes."""
    s = name.strip().lower()
    s = _TRUNCATED.sub("", s)
    s = re.sub(r"[-_/]+", " ", s)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"^nvidia\s+", "", s)
    s = re.sub(r"\btm\b|\(tm\)|\(r\)", "", s).strip()
    return s


def _brandless(s: str) -> str:
    """Without the family word nvidia-smi sometimes prints and sometimes not."""
    return re.sub(r"^(geforce|tesla|quadro)\s+", "", s)


def _strip_suffixes(s: str) -> Iterable[str]:
    seen = s
    while True:
        nxt = _SUFFIXES.sub("", seen).strip()
        if nxt == seen or not nxt:
            return
        yield nxt
        seen = nxt


@lru_cache(maxsize=4)
def _index(rows: tuple[GpuRow, ...]) -> tuple[dict[str, GpuRow], dict[str, list[GpuRow]]]:
    exact: dict[str, GpuRow] = {}
    loose: dict[str, list[GpuRow]] = {}
    for row in rows:
        for spelling in (row.name, *row.aliases):
            key = normalise(spelling)
            exact.setdefault(key, row)
            loose.setdefault(_brandless(key), []).append(row)
    return exact, loose


def _unique(rows: list[GpuRow]) -> Optional[GpuRow]:
    """One row, or several that agree on the compute capability (first wins)."""
    if rows and len({r.compute_capability for r in rows}) == 1:
        return rows[0]
    return None


def match_gpu(rows: tuple[GpuRow, ...], name: str) -> Optional[GpuRow]:
    if not name or not name.strip():
        return None
    exact, loose = _index(rows)
    truncated = bool(_TRUNCATED.search(name))
    base = normalise(name)
    for key in (base, *_strip_suffixes(base)):
        if key in exact:
            return exact[key]
        hit = _unique(loose.get(_brandless(key), []))
        if hit is not None:
            return hit
    if truncated:
        # "GeForce RTX 208..." -> every model whose name starts so; all must agree on the CC.
        prefix = _brandless(base)
        cands = [r for key, rs in loose.items() if key.startswith(prefix) for r in rs]
        return _unique(cands)
    return None


def gpu_by_name(knowledge: Knowledge, name: str) -> Optional[GpuRow]:
    """Match an nvidia-smi GPU name ("Tesla K80", "NVIDIA GeForce RTX 3090",
    "GeForce GTX 1080 Ti", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB") to a row."""
    return match_gpu(knowledge.gpus, name)
