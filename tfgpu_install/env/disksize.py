"""How much disk a directory tree takes: its blocks, each inode counted once (uv links a warm
cache's files into every env, so a file's apparent size is not what removing the env frees).
Symlinks are never followed.

tree_usage splits a tree's bytes by inode into its own (every hard link of the inode is inside the
tree: removing the tree frees them) and shared (the inode has links outside it too: uv's cache,
another env; they stay). Each tree is measured alone, so an env's figures do not depend on which
other envs were measured before it (disk_usage with a shared `seen` set counted a file for whichever
env came first: `envs` sizes moved with the listing order).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
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


@dataclass(frozen=True)
class TreeUsage:
    own: int  # bytes whose every link is inside the tree: what removing it frees
    shared: int  # bytes of inodes also linked from outside the tree: they stay when it goes

    @property
    def total(self) -> int:
        return self.own + self.shared


def tree_usage(root: Path) -> TreeUsage:
    """`root`'s bytes on disk, each inode once, split into own and shared by its link count: an inode
    with more links (st_nlink) than the tree holds is linked from outside too. Directories are the
    tree's own. A missing path is 0 and 0."""
    links: dict[tuple[int, int], int] = {}  # inode -> links to it seen inside the tree
    facts: dict[tuple[int, int], tuple[int, int, bool]] = {}  # inode -> (bytes, st_nlink, directory)
    stack = [str(root)]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        links[key] = links.get(key, 0) + 1
        if key in facts:
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        facts[key] = (st.st_blocks * 512, st.st_nlink, is_dir)
        if is_dir:
            try:
                with os.scandir(path) as it:
                    stack.extend(entry.path for entry in it)
            except OSError:
                continue
    own = shared = 0
    for key, (size, nlink, is_dir) in facts.items():
        if is_dir or nlink <= links[key]:
            own += size
        else:
            shared += size
    return TreeUsage(own, shared)
