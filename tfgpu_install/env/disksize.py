"""How much disk a directory tree takes: its blocks, each inode counted once (uv links a warm
cache's files into every env, so a file's apparent size is not what removing the env frees).
Symlinks are never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional


def disk_usage(root: Path, seen: Optional[set[tuple[int, int]]] = None) -> int:
    """Bytes on disk under `root` (0 for a missing path); `seen` shares the inode set between
    trees so a total counts a file linked into two of them once."""
    seen = set() if seen is None else seen
    total = 0
    stack = [str(root)]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as it:
                    stack.extend(entry.path for entry in it)
            except OSError:
                continue
    return total
