"""Compiled dataclass methods, kept between runs.

Every command imports some 60 dataclasses (facts, knowledge, plans, reports). For each one the
standard library writes __init__/__repr__/__eq__ (and __hash__/__setattr__/__delattr__ when
frozen) as source text and compiles it with exec() at import time: ~1 ms a class on CPython
3.11, half of a `plan`'s own time. The texts are the same from one run to the next, so this
module compiles each once and keeps the code objects in the cache dir, as Python keeps a
module's bytecode in __pycache__ (same trust: a file the user owns, marshal of code objects,
one file per interpreter's bytecode magic).

How: `dataclasses` calls exec() by its global name; `enable()` gives that module an exec()
that looks the source text up first and otherwise does exactly what the builtin does. It works
on any dataclasses whose generated code goes through exec(str, ...) (3.8 to 3.13); anything
else passes through untouched. A missing, damaged or foreign cache file is ignored and
rewritten; nothing here ever fails a command.
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any, Optional

from tfgpu_install.dirs import writable_only_by_me

MAX_BYTES = 8 << 20  # far above what the tool's classes need (~0.5 MB): a runaway file is dropped
MAX_ENTRIES = 5000

_codes: dict[str, CodeType] = {}
_state: dict[str, Any] = {"path": None, "dirty": False}


def _cached_exec(source: Any, globals: Optional[dict[str, Any]] = None,
                 locals: Optional[dict[str, Any]] = None, /, **more: Any) -> None:
    if more:  # a call shape this module does not know (a future `closure=`): the builtin, as asked
        builtins.exec(source, globals, locals, **more)
        return
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None:
            # what builtins.exec(str) compiles: "<string>", no future flags (dataclasses has none)
            code = compile(source, "<string>", "exec", dont_inherit=True)
            if len(_codes) < MAX_ENTRIES:
                _codes[source] = code
                _state["dirty"] = True
        source = code
    builtins.exec(source, globals, locals)


def cache_file(cache_dir: Path) -> Path:
    from importlib.util import MAGIC_NUMBER

    return Path(cache_dir) / f"dataclass-code-{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}.marshal"


def load(path: Path) -> dict[str, CodeType]:
    """The kept code objects, or {} for a missing, oversized, damaged or foreign-owned file
    (another user's, or writable by others)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not writable_only_by_me(st):
                return {}  # code only from a file this user wrote and no one else may change
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return {}
        doc = marshal.loads(data)
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, CodeType)}


def save() -> None:
    """Write the code objects back when this run compiled new ones (atomically; errors ignored)."""
    path = _state["path"]
    if path is None or not _state["dirty"]:
        return
    from tfgpu_install.errors import TfgpuError
    from tfgpu_install.files import atomic_write

    try:
        atomic_write(path, marshal.dumps(dict(_codes)))
        _state["dirty"] = False
    except (OSError, ValueError, TfgpuError):
        pass  # a cache (full disk, unwritable dir): compiled again next time


def enable(cache_dir: Path) -> bool:
    """Route dataclasses' exec() through the cache for this process. False (and nothing
    changed) when the interpreter is not CPython or dataclasses already has its own exec."""
    import dataclasses

    if sys.implementation.name != "cpython" or "exec" in vars(dataclasses):
        return False
    path = cache_file(cache_dir)
    _codes.update(load(path))
    _state["path"] = path
    dataclasses.exec = _cached_exec  # type: ignore[attr-defined]
    atexit.register(save)
    return True


def disable() -> None:
    """Back to the builtin (tests)."""
    import dataclasses

    if vars(dataclasses).get("exec") is _cached_exec:
        del dataclasses.exec  # type: ignore[attr-defined]
    _codes.clear()
    _state.update(path=None, dirty=False)
