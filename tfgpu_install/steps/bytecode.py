"""Compiled bytecode shared between envs whose packages are the same files.

uv links a warm cache's files into each new env (hard links), so a second env's numpy or
tensorflow sources are the very files (same inode) of the first env's. What the first env's
interpreter compiled into __pycache__ is then valid for the second one too: a .pyc is checked
against its source's mtime and size (the same file: the same), and Python sets the code's
file name from where it found the source. Linking those .pyc files spares the new env's first
import its compile (seconds for TensorFlow; most of a warm install's verification) and the
disk (the second env adds no bytecode of its own).

Nothing is linked that could be wrong: only a regular source file that is the donor's own
file (same device and inode), only for the env's own interpreter (its cache tag), never
through a symlink, never replacing a file, only a .pyc this user owns and no one else may write.
A .pyc Python finds stale it rewrites by rename, which leaves the donor's untouched. Failures
(another filesystem, permissions) skip the file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from tfgpu_install.context import Context
from tfgpu_install.dirs import writable_only_by_me
from tfgpu_install.env.layout import site_packages_dirs

MAX_DONORS = 1  # the most recently changed of this tool's other envs (each donor is a walk of its tree)


def donor_envs(ctx: Context, env: Path, limit: int = MAX_DONORS) -> list[Path]:
    """This tool's other envs that still exist, most recently changed first."""
    from tfgpu_install.env.state import known_envs

    mine = os.path.abspath(str(env))
    return [p for p in known_envs(ctx) if os.path.isabs(p) and os.path.abspath(p) != mine and p.is_dir()][:limit]


@dataclass(frozen=True)
class DonorBytecode:
    """What one donor site-packages compiled, for one tag: per dir (relative to it), each .pyc
    name with its source file's (device, inode) as the survey found them."""

    site_packages: Path
    tag: str
    dirs: tuple[tuple[str, tuple[tuple[str, int, int], ...]], ...]


def survey(site_packages: Path, tag: str) -> DonorBytecode:
    """Walk a donor's tree for its compiled files and their sources' identities (the slow half:
    ~70 ms for a TensorFlow env, so packages.install runs it while uv installs)."""
    root = str(site_packages)
    dirs = []
    for rel, names in _pycache_dirs(Path(site_packages), tag):
        here = root if rel == "." else os.path.join(root, rel)
        found = []
        for pyc in names:
            try:
                st = os.lstat(os.path.join(here, pyc.split(".", 1)[0] + ".py"))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((pyc, st.st_dev, st.st_ino))
        if found:
            dirs.append((rel, tuple(found)))
    return DonorBytecode(Path(site_packages), tag, tuple(dirs))


def link_from(site_packages: Path, donor: DonorBytecode) -> int:
    """Hard-link into `site_packages` the donor's .pyc files whose source is the same file here;
    returns how many were linked. On the install's critical path (a TensorFlow env: ~2,400
    files in ~660 dirs), so three system calls a file: our source's lstat, the link, and the
    link's own lstat (what was linked is what is checked: no window between check and link)."""
    linked = 0
    target_root, donor_root = str(site_packages), str(donor.site_packages)
    for rel_dir, pycs in donor.dirs:
        src_dir = target_root if rel_dir == "." else os.path.join(target_root, rel_dir)
        if not _plain_dir(src_dir):
            continue
        same = [pyc for pyc, dev, ino in pycs
                if _is_file(os.path.join(src_dir, pyc.split(".", 1)[0] + ".py"), dev, ino)]
        if not same:
            continue
        cache_dir = os.path.join(src_dir, "__pycache__")
        have = _cache_dir(cache_dir)
        if have is None:
            continue
        theirs = os.path.join(donor_root, rel_dir, "__pycache__")
        for pyc in same:
            if pyc not in have:
                linked += _link(os.path.join(theirs, pyc), os.path.join(cache_dir, pyc))
    return linked


def donor_for(ctx: Context, env: Path, python_version: str) -> Optional[DonorBytecode]:
    """The surveyed bytecode of this tool's newest other env on the same lib/pythonX.Y (its files
    are the most likely to be the same ones), for the env's CPython X.Y tag; None without one."""
    parts = python_version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    mine = site_packages_dirs(env)
    if not mine:
        return None
    donors = [sp for d in donor_envs(ctx, env, limit=16) for sp in site_packages_dirs(d)
              if sp.parent.name == mine[0].parent.name][:MAX_DONORS]
    return survey(donors[0], f"cpython-{parts[0]}{parts[1]}") if donors else None


def _pycache_dirs(root: Path, cache_tag: str) -> Iterator[tuple[str, list[str]]]:
    """(dir relative to root, its __pycache__'s .pyc names for cache_tag), symlinks not followed."""
    suffix = f".{cache_tag}.pyc"
    opt = f".{cache_tag}.opt-"
    for here, dirs, _files in os.walk(root):
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            try:
                names = [n for n in os.listdir(os.path.join(here, "__pycache__"))
                         if n.endswith(suffix) or (opt in n and n.endswith(".pyc"))]
            except OSError:
                names = []
            if names:
                yield os.path.relpath(here, root), names


def _plain_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_file(path: str, dev: int, ino: int) -> bool:
    """`path` is a regular file (not a link) and the very file (dev, ino)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (dev, ino)


def _cache_dir(path: str) -> Optional[set[str]]:
    """The names already in __pycache__ ({} when this made it); None when it is not a plain
    directory (a symlink is never written through) or cannot be made."""
    try:
        os.mkdir(path)
        return set()
    except FileExistsError:
        pass
    except OSError:
        return None
    if not _plain_dir(path):
        return None
    try:
        return set(os.listdir(path))
    except OSError:
        return None


def _link(source: str, dest: str) -> int:
    try:
        os.link(source, dest, follow_symlinks=False)
    except OSError:  # exists already, another filesystem, not permitted: the env compiles it
        return 0
    try:
        st = os.lstat(dest)
        # code this user's own Python wrote: never a file another user could have put there
        if stat.S_ISREG(st.st_mode) and writable_only_by_me(st):
            return 1
    except OSError:
        pass
    try:
        os.unlink(dest)
    except OSError:
        pass
    return 0
