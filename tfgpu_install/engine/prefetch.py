"""Modules a run will import later, imported while it waits on a child process.

A provision spends most of its time waiting for uv and for the env's own Python; its own
later imports (packaging's requirement parser after the install, yaml and the snapshot
modules for the record) would otherwise run after those waits, on the critical path. Steps
name them (`Step.prefetch`); the executor imports them on a daemon thread, which runs while
the main thread sits in a wait that releases the GIL. Only modules outside any import cycle
belong there (import_graph.py shows none in tfgpu_install/): two threads importing one module
simply take turns on its lock. Failures are left for the real import to report.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Iterable, Optional


def start(modules: Iterable[str]) -> Optional[threading.Thread]:
    """Import `modules` (in order, each once) on a daemon thread; None when there is nothing to do."""
    todo = [m for m in dict.fromkeys(modules) if m not in sys.modules]
    if not todo:
        return None

    def run() -> None:
        for name in todo:
            try:
                importlib.import_module(name)
            except Exception:  # the step's own import will say what is wrong
                pass

    thread = threading.Thread(target=run, name="prefetch", daemon=True)
    thread.start()
    return thread
