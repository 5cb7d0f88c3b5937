"""Where the tool keeps its state, cache and data (XDG dirs, TFGPU_*_DIR overrides), and which
kept files it trusts: read by the Context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def user_dirs(environ: Mapping[str, str], home: Path) -> tuple[Path, Path, Path]:
    """(state, cache, data): TFGPU_STATE_DIR / TFGPU_CACHE_DIR / TFGPU_DATA_DIR, else the XDG user
    dirs (what platformdirs answers on Linux, the only platform this tool provisions), without
    importing it: this is on every command's start."""

    def xdg(var: str, default: str) -> Path:
        value = environ.get(var, "")
        return Path(value) if os.path.isabs(value) else home / default

    return (
        Path(environ.get("TFGPU_STATE_DIR") or xdg("XDG_STATE_HOME", ".local/state") / "tfgpu-install"),
        Path(environ.get("TFGPU_CACHE_DIR") or xdg("XDG_CACHE_HOME", ".cache") / "tfgpu-install"),
        Path(environ.get("TFGPU_DATA_DIR") or xdg("XDG_DATA_HOME", ".local/share") / "tfgpu-install"),
    )


def home_of(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or str(Path.home()))


def writable_only_by_me(st: os.stat_result) -> bool:
    """The trust rule for what the tool keeps and later runs or believes (kept code, shared
    bytecode, remembered library loads): a file this user owns that no one else may write."""
    return st.st_uid == os.getuid() and not st.st_mode & 0o022
