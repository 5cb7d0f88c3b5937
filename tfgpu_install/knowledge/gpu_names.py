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
    r"founders edition|active|passive|developer kit|\d+\s?gb/\d+\s?gb))$"
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
    """The row of an nvidia-smi name, or of the physical GPU under a vGPU profile name; None when unknown."""
    if not name or not name.strip():
        return None
    return _match_physical(rows, name) or _match_vgpu(rows, name)


def _match_physical(rows: tuple[GpuRow, ...], name: str) -> Optional[GpuRow]:
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


# A vGPU profile as nvidia-smi prints it inside the VM: "GRID A100D-40C", "GRID T4-16Q", "NVIDIA L40S-48Q",
# "GRID RTX6000-24Q": board, then frame buffer in GB and the series letter (A apps, B business, C compute,
# Q workstation). Normalised: "grid a100d 40c". The board may carry a variant letter NVIDIA's vGPU docs
# use for the physical board (A100D/A100X/V100DX/V100D/V100S/V100L/H100XM/L40S): tried as printed, then without it.
_VGPU = re.compile(
    r"^(?:grid\s+)?(?P<board>(?:rtx\s?)?[a-z]{1,3}\d{1,4}[a-z]{0,2})\s(?P<fb>\d{1,3})(?P<series>[abcqh])$")
_BOARD_VARIANT = re.compile(r"(?<=\d)(?:dx|xm|xl|d|x|l|s)$")


def vgpu_board(name: str) -> Optional[str]:
    """The physical board under a vGPU profile name ("GRID A100D-40C" -> "A100D"), else None."""
    m = _VGPU.match(normalise(name))
    return m.group("board").upper().replace(" ", "") if m else None


def _match_vgpu(rows: tuple[GpuRow, ...], name: str) -> Optional[GpuRow]:
    m = _VGPU.match(normalise(name))
    if m is None:
        return None
    board = m.group("board")
    spaced = re.sub(r"^rtx(?=\d)", "rtx ", board)
    for cand in dict.fromkeys((board, spaced, _BOARD_VARIANT.sub("", board), _BOARD_VARIANT.sub("", spaced))):
        for prefix in ("", "nvidia ", "tesla ", "quadro "):
            row = _match_physical(rows, prefix + cand)
            if row is not None:
                return row
    return None


# Not NVIDIA: named as such, never given a guessed compute capability.
_FOREIGN = (
    ("AMD", re.compile(r"\b(?:amd|ati|radeon|instinct|firepro)\b", re.I),
     "this tool provisions TensorFlow's CUDA builds, which run on NVIDIA GPUs only; for AMD GPUs use ROCm's "
     "TensorFlow (`pip install tensorflow-rocm`, https://rocm.docs.amd.com), or provision for the CPU (--allow-cpu)"),
    ("Intel", re.compile(r"\b(?:intel|arc|iris|uhd graphics|hd graphics|data center gpu (?:max|flex))\b", re.I),
     "this tool provisions TensorFlow's CUDA builds, which run on NVIDIA GPUs only; for Intel GPUs use Intel's "
     "extension (`pip install intel-extension-for-tensorflow[xpu]`), or provision for the CPU (--allow-cpu)"),
    ("Apple", re.compile(r"\bapple\b|^m[1-4](?:\s(?:pro|max|ultra))?$", re.I),
     "this tool provisions TensorFlow's CUDA builds for Linux with NVIDIA GPUs; on Apple silicon use "
     "`pip install tensorflow tensorflow-metal`"),
)


def foreign_gpu(name: str) -> Optional[tuple[str, str]]:
    """(vendor, honest remedy) when the name is an AMD / Intel / Apple GPU, else None."""
    if re.search(r"\bnvidia\b|geforce|quadro|tesla", name, re.I):
        return None
    for vendor, pattern, remedy in _FOREIGN:
        if pattern.search(name.strip()):
            return vendor, remedy
    return None


def gpu_by_name(knowledge: Knowledge, name: str) -> Optional[GpuRow]:
    """Match an nvidia-smi GPU name ("Tesla K80", "NVIDIA GeForce RTX 3090",
    "GeForce GTX 1080 Ti", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB") to a row."""
    return match_gpu(knowledge.gpus, name)
