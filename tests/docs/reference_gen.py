"""scripts/docs_reference.py, loaded as a module for the docs tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load() -> ModuleType:
    if "docs_reference" in sys.modules:
        return sys.modules["docs_reference"]
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "scripts" / "docs_reference.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["docs_reference"] = mod  # NamedTuples resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod
