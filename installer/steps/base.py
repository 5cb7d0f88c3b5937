"""The step contract: check / apply / undo, talking to the system through ctx.runner.

- `check(ctx)` is read-only, cheap and honest: True when the step's effect is in place.
- `apply(ctx)` does the work and returns a JSON-able undo record. It must be safe to
  re-run after a kill at any point (write to temp + rename; create-if-missing).
- `undo(ctx, record)` reverses apply and tolerates partial state.
- `touches(ctx)` lists the paths apply may change (journaled before acting).
No step has an `if dry_run:` branch: a dry run is the executor stopping before apply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ..context import Context

UndoRecord = dict[str, Any]


class Step(ABC):
    id: str = "step"

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def check(self, ctx: Context) -> bool: ...

    @abstractmethod
    def apply(self, ctx: Context) -> UndoRecord: ...

    @abstractmethod
    def undo(self, ctx: Context, record: UndoRecord) -> None: ...

    def touches(self, ctx: Context) -> list[str]:
        return []

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "describe": self.describe()}
