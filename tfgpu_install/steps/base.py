"""The step contract: check / apply / undo, talking to the system through ctx.runner.

- `check(ctx)` is read-only, cheap and honest: True when the step's effect is in place.
- `apply(ctx)` does the work and returns a JSON-able undo record. It must be safe to
  re-run after a kill at any point (write to temp + rename; create-if-missing).
- `undo(ctx, record)` reverses apply and tolerates partial state.
- `touches(ctx)` lists the paths apply may change (journaled before acting).
- A step that needs what an earlier step of the same run returned names those steps in `needs`;
  the executor hands their records to `apply_with(ctx, earlier)` as an argument (the Context
  carries no results).
No step has an `if dry_run:` branch: a dry run is the executor stopping before apply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import MappingProxyType
from typing import Any, Mapping

from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import JSONObject

UndoRecord = JSONObject
NOTHING_EARLIER: Mapping[str, UndoRecord] = MappingProxyType({})


class Step(ABC):
    id: str = "step"
    needs: tuple[str, ...] = ()  # ids of earlier steps whose records apply_with() receives

    def apply_with(self, ctx: Context, earlier: Mapping[str, UndoRecord]) -> UndoRecord:
        """apply(), given the records of the steps in `needs` that ran earlier in this run (a step
        that was already done has none)."""
        return self.apply(ctx)

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

    def preflight(self, ctx: Context) -> None:
        """What apply() will need that can be checked before any step changes anything (a tool that must be
        there): raises the error apply() would. Run for every pending step before the first change, and under
        --dry-run, so a dry run fails the way the real run would (app/provision.py)."""
        return None

    def owns(self, ctx: Context, path: Any) -> bool:
        """Undo of a killed apply: may a path this step touched, that was not there before, be
        removed? (Yes by default; env.create says only while it is the directory it made.)"""
        return True

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "describe": self.describe()}


# --- test-only fault hooks (ctx.hooks, context.Hooks; inert unless a test arms them) ---
# kill_at="<step-id>:before|middle|after"  -> SIGKILL this process there
# fail_at="<step-id>:before|middle|after:enospc|eacces" -> raise that OSError there
# stop_at="<step-id>:before|middle|after"  -> SIGSTOP there (concurrency tests)
# The executor calls checkpoint() at "before" and "after" (and "undo", before undoing a step
# in a rollback); a step calls it at its midpoint
# (after it has changed something, before it has finished), so tests can interrupt it.


def checkpoint(ctx: Context, step_id: str, where: str) -> None:
    """A point where fault-injection tests may kill or fail this run. No-op in real use."""
    here = f"{step_id}:{where}"
    kill_at = ctx.hooks.kill_at
    if kill_at and kill_at == here:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    stop_at = ctx.hooks.stop_at
    if stop_at and stop_at == here:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGSTOP)
    fail_at = ctx.hooks.fail_at
    if fail_at and fail_at.rsplit(":", 1)[0] == here:
        import errno

        kind = fail_at.rsplit(":", 1)[1]
        code = {"enospc": errno.ENOSPC, "eacces": errno.EACCES, "erofs": errno.EROFS}.get(kind, errno.EIO)
        import os

        raise OSError(code, os.strerror(code), f"(test fault at {here})")
