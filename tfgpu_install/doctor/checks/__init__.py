"""Machine checks, registered one file each, the way conda registers its health checks: a module in this
package defines `CHECK = MachineCheck(...)`, naming what it checks, the fix it gives, and its place in the
bottom-up walk. doctor/chain.py runs every registered check by `order` and stops at the first broken layer.

Where a machine check goes: a new file here with its CHECK (and, when its finding has a known cause and
fix, a rule in profiles/errors.yaml); nothing else to edit (tests/doctor/test_doctor_checks.py holds it)."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from tfgpu_install.doctor.walkstate import Check, Walk


@dataclass(frozen=True)
class MachineCheck:
    name: str
    order: int  # its place in the walk, bottom-up (driver 10 ... ptxas 140)
    what: str  # what it checks
    fix: str  # the fix it points at when it fails (the Check it returns carries the exact one)
    run: Callable[[Walk], Sequence[Optional[Check]]]
    host: bool = False  # a host layer below the env's own checks: when it breaks, the env's layers wait


def registered() -> tuple[MachineCheck, ...]:
    """Every module of this package's CHECK, in walk order."""
    found = []
    for mod in pkgutil.iter_modules(__path__):
        check = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "CHECK", None)
        if not isinstance(check, MachineCheck):
            raise TypeError(f"{__name__}.{mod.name} defines no CHECK = MachineCheck(...)")
        found.append(check)
    orders = [c.order for c in found]
    if len(set(orders)) != len(orders):
        raise ValueError(f"two machine checks share an order: {sorted(orders)}")
    return tuple(sorted(found, key=lambda c: c.order))
