"""Library loads already seen to work, kept so that the same files are not loaded twice.

libraries.check proves the CUDA/cuDNN libraries load by dlopen()ing them in a child of the
env's Python (~30 ms a run). uv links a warm cache's files into every new env, so a second
env's nvidia/*/lib files are the very files (same inodes) that already loaded in the first.
A load that worked is remembered under everything its outcome depends on, and a check whose
inputs are all identical is answered from that:

- the machine (its host name: a home shared between nodes shares the cache dir);
- each nvidia/*/lib dir (relative to site-packages: $ORIGIN runpaths only see the layout) and
  every entry in it: name, kind, device, inode, size, mtime (a symlink: its target);
- the env's interpreter binary (the process that loads them);
- what else the loader reads: LD_LIBRARY_PATH (and each of its dirs) and LD_PRELOAD,
  /etc/ld.so.cache and /etc/ld.so.preload, and the system library dirs themselves (a library
  added or removed there changes its directory's mtime).

Only successes are kept (a failure is always loaded again, for a current message), only in
a file this user owns that no one else may write; anything unreadable is a miss. The
verification that follows an install loads the same libraries again in TensorFlow itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Mapping, Optional, Sequence

from tfgpu_install.dirs import writable_only_by_me
from tfgpu_install.errors import TfgpuError
from tfgpu_install.files import atomic_write

MEMO_FILE = "library-loads.json"
MAX_KEPT = 64
MAX_BYTES = 64 << 10
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.preload")
SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
               "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/lib")


def _identity(path: str, follow: bool = True) -> list[object]:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        return [path, "absent", exc.errno]
    entry: list[object] = [path, stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
    if stat.S_ISLNK(st.st_mode):
        try:
            entry.append(os.readlink(path))
        except OSError:
            entry.append(None)
    return entry


def load_key(site_packages: Path, lib_dirs: Sequence[Path], python: Path, sonames: Sequence[str],
             environ: Mapping[str, str]) -> Optional[str]:
    """A digest of everything the load check's outcome depends on; None when a dir cannot be read."""
    host = os.uname()  # a home dir shared between machines shares this file: never their answers
    parts: list[object] = ["v1", host.nodename, host.machine, list(sonames), _identity(os.path.realpath(python))]
    ld_path = environ.get("LD_LIBRARY_PATH", "")
    parts += [ld_path, environ.get("LD_PRELOAD", "")] + [_identity(d) for d in ld_path.split(os.pathsep) if d]
    parts += [_identity(p) for p in SYSTEM_FILES] + [_identity(d) for d in SYSTEM_DIRS]
    for d in lib_dirs:
        try:
            names = sorted(os.listdir(d))
            rel = os.path.relpath(d, site_packages)
        except (OSError, ValueError):
            return None
        parts.append([rel, [_identity(os.path.join(d, n), follow=False)[1:] + [n] for n in names]])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _read(memo: Path) -> list[str]:
    try:
        with open(memo, "rb") as f:
            st = os.fstat(f.fileno())
            # a file another user could have written says nothing about what loads here
            if not writable_only_by_me(st) or st.st_size > MAX_BYTES:
                return []
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return []
    return [k for k in doc if isinstance(k, str)] if isinstance(doc, list) else []


def known_to_load(cache_dir: Path, key: Optional[str]) -> bool:
    """A memo is only believed when it and the dirs up to the cache dir pass tfgpu_install/guard/trust.py
    (a memo only saves time: a doubtful one is ignored, the load is checked again)."""
    from tfgpu_install.guard.trust import problem

    memo = cache_dir / MEMO_FILE
    return key is not None and problem(memo, cache_dir) is None and key in _read(memo)


def remember_load(cache_dir: Path, key: Optional[str]) -> None:
    """Keep `key` as a load that worked (newest last, at most MAX_KEPT); never fails the caller."""
    if key is None:
        return
    memo = cache_dir / MEMO_FILE
    kept = [k for k in _read(memo) if k != key] + [key]
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(memo, json.dumps(kept[-MAX_KEPT:]), mode=0o600)
    except (OSError, TfgpuError):
        pass  # a cache (full disk, read-only dir): loaded again next time
