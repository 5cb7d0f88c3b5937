"""A directory built beside its destination and renamed into place (bundle, image), which a killed
run does not leave behind for ever.

The build dir is `.<name>.partial-<random>` next to DIR, and next to it a lock file of the same
name plus `.lock`, created first and held (flock) while the build runs: a process that dies, even by
SIGKILL, releases it. Every later build beside DIR first removes the build dirs whose lock is free
or gone (a lock file is removed only after its dir was renamed away), and only its own user's, never
following a link. Nothing here is taken from a document: the names are ours.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_LOCK = ".lock"


def _partial_prefix(out: Path) -> str:
    return f".{out.name}.partial-"


def _held(lock: Path) -> bool:
    """Whether a live process holds this lock file (False: no such file, or nobody holds it)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)
    return False


def sweep(out: Path) -> list[Path]:
    """Remove what killed builds of `out` left beside it (and any of our build dirs there whose lock
    is free); returns what was removed."""
    parent = out.parent
    mine = _partial_prefix(out)
    removed: list[Path] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        if ".partial-" not in name or not name.startswith(".") or name.endswith(_LOCK):
            continue
        path = parent / name
        lock = parent / (name + _LOCK)
        ours = name.startswith(mine)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid != os.geteuid() or not os.path.isdir(path) or os.path.islink(path):
            continue
        has_lock = os.path.lexists(lock)
        if (has_lock and not _held(lock)) or (ours and not has_lock):
            shutil.rmtree(path, ignore_errors=True)
            if has_lock:
                _unlink(lock)
            removed.append(path)
    return removed


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """A new, locked build dir beside `out` (swept first). The caller renames it to `out` when it is
    whole; on any error (or KeyboardInterrupt) it is removed here."""
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep(out)
    fd, lock_name = tempfile.mkstemp(prefix=_partial_prefix(out), suffix=_LOCK, dir=out.parent)
    lock = Path(lock_name)
    tmp = Path(lock_name[: -len(_LOCK)])
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.mkdir(tmp, 0o700)
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            if os.path.isdir(tmp) and not os.path.islink(tmp):
                # left by the caller without renaming (an early return): not a build anyone finishes
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        _unlink(lock)  # only now: the dir is renamed away or removed
        os.close(fd)


__all__ = ["building", "sweep"]
