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
through a symlink, never replacing a file, only a .pyc this user owns and no one else may write. A .pyc Python finds stale it rewrites by rename,
which leaves the donor's untouched. Failures (another filesystem, permissions) skip the file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from installer.context import Context
from installer.envlayout import site_packages_dirs

MAX_DONORS = 1  # the most recently changed of this tool's other envs (each donor is a walk of its tree)


def donor_envs(ctx: Context, env: Path, limit: int = MAX_DONORS) -> list[Path]:
    """This tool's other envs that still exist, most recently changed first."""
    from installer.engine.journal import known_envs

    mine = os.path.abspath(str(env))
    return [p for p in known_envs(ctx) if os.path.isabs(p) and os.path.abspath(p) != mine and p.is_dir()][:limit]


@dataclass(frozen=True)
class DonorBytecode:
    """What one donor site-packages compiled: (dir relative to it, its .pyc names) for one tag."""

    site_packages: Path
    tag: str
    dirs: tuple[tuple[str, tuple[str, ...]], ...]


def survey(site_packages: Path, tag: str) -> DonorBytecode:
    """Walk a donor's tree for its compiled files (the slow half: ~70 ms for a TensorFlow env,
    so packages.install runs it while uv installs)."""
    return DonorBytecode(Path(site_packages), tag, tuple((d, tuple(n)) for d, n in _pycache_dirs(Path(site_packages), tag)))


def link_from(site_packages: Path, donor: DonorBytecode) -> int:
    """Hard-link into `site_packages` the donor's .pyc files whose source is the same file here;
    returns how many were linked."""
    linked = 0
    target_root = Path(site_packages)
    for rel_dir, pyc_names in donor.dirs:
        src_dir = target_root / rel_dir
        if not _plain_dir(src_dir):
            continue
        cache_dir = src_dir / "__pycache__"
        try:
            have = set(os.listdir(cache_dir)) if _plain_dir(cache_dir) else set()
        except OSError:
            continue
        for pyc in pyc_names:
            stem = pyc.split(".", 1)[0]
            if pyc not in have and _same_file(src_dir / f"{stem}.py", donor.site_packages / rel_dir / f"{stem}.py"):
                linked += _link(donor.site_packages / rel_dir / "__pycache__" / pyc, cache_dir, pyc)
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


def _plain_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _same_file(ours: Path, theirs: Path) -> bool:
    try:
        a, b = os.lstat(ours), os.lstat(theirs)
    except OSError:
        return False
    return stat.S_ISREG(a.st_mode) and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _link(source: Path, cache_dir: Path, name: str) -> int:
    try:
        st = os.lstat(source)
        # code this user's own Python wrote: never a file another user could have put there
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return 0
        if not os.path.lexists(cache_dir):
            os.mkdir(cache_dir)
        elif not _plain_dir(cache_dir):
            return 0
        os.link(source, cache_dir / name, follow_symlinks=False)
        return 1
    except OSError:  # exists already, another filesystem, not permitted: the env compiles it
        return 0
