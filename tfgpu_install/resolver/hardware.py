"""Hardware limits from drivers.yaml (pure): which GPUs a driver branch still drives, and which
compute capabilities a ptxas can compile for."""

from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

from tfgpu_install.knowledge.model import ArchRow, PtxasRow


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def architecture_of(rows: Iterable[ArchRow], cc: str) -> Optional[ArchRow]:
    return next((r for r in rows if _key(r.cc_min) <= _key(cc) <= _key(r.cc_max)), None)


def dropped_by_driver(rows: Iterable[ArchRow], cc: str, driver: str) -> Optional[ArchRow]:
    """The architecture row when `driver`'s branch is newer than the last one supporting `cc`."""
    row = architecture_of(rows, cc)
    branch = _key(driver)[:1]
    return row if row is not None and branch and branch[0] > row.last_branch else None


def ptxas_row(rows: Iterable[PtxasRow], ptxas: str) -> Optional[PtxasRow]:
    """What a ptxas of this CUDA version knows: the newest row at or below it."""
    fits = [r for r in rows if _key(r.ptxas) <= _key(ptxas)]
    return max(fits, key=lambda r: _key(r.ptxas)) if fits else None


def ptxas_knows(rows: Sequence[PtxasRow], ptxas: str, cc: str) -> Optional[bool]:
    """None when the table says nothing about this ptxas (older than every row). A compute capability
    at or below its highest is known unless a later ptxas is the one that adds it (10.3 after 12.0)."""
    row = ptxas_row(rows, ptxas)
    if row is None:
        return None
    added_later = any(_key(cc) == _key(a) for r in rows if _key(r.ptxas) > _key(ptxas) for a in r.adds)
    return _key(cc) <= _key(row.highest_cc) and not added_later


def ptxas_for(rows: Sequence[PtxasRow], cc: str) -> Optional[PtxasRow]:
    """The oldest ptxas in the table that compiles for `cc`."""
    fits = [r for r in rows if ptxas_knows(rows, r.ptxas, cc)]
    return min(fits, key=lambda r: _key(r.ptxas)) if fits else None
