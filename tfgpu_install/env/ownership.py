"""Deletion by identity: an env directory this tool made is removed only while it is still that
directory. At creation the tool records its identity: the device and inode of the directory, its
real path (every link on the way resolved) and a marker file it writes inside it (naming the
env's path: the same bytes for the same env, so a resumed install equals an uninterrupted one).
Before removing, the path (looked at without following a link at its end) must be a directory
with the same device, inode and real path, holding that marker. The user's own directory put
there after the env was gone (a new inode, or a reused one without the marker), or a parent
swapped for a link into another tree (another real path), is not the env: nothing of it is
removed."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Mapping, Optional

from tfgpu_install.guard.jsondoc import JSONObject, JSONValue

MARKER = ".tfgpu-install-env"
MAX_MARKER = 4096


def dir_identity(path: Path) -> Optional[JSONObject]:
    """{"dev", "ino", "real"} of the directory at `path` (not followed if it is a link), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return {"dev": st.st_dev, "ino": st.st_ino, "real": os.path.realpath(path)}


def stamp(path: Path) -> JSONObject:
    """Mark the env being made: the marker inside it, and its identity with the marker's token."""
    from tfgpu_install.files import atomic_write

    token = os.path.abspath(path)

    atomic_write(path / MARKER, json.dumps({"token": token, "written_by": "tfgpu-install"}) + "\n", mode=0o644)
    ident = dir_identity(path) or {}
    return {**ident, "token": token}


def _token(path: Path) -> Optional[str]:
    try:
        fd = os.open(path / MARKER, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        raw = os.read(fd, MAX_MARKER + 1)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw) if len(raw) <= MAX_MARKER else None
    except ValueError:
        return None
    token = doc.get("token") if isinstance(doc, dict) else None
    return token if isinstance(token, str) else None


def problem(path: Path, recorded: Mapping[str, JSONValue]) -> Optional[str]:
    """None when `path` is still the directory `recorded` describes; else why it is not (a sentence)."""
    now = dir_identity(path)
    if now is None:
        return "it is not a directory (or a link to one)" if os.path.lexists(path) else "it is gone"
    if now["real"] != recorded.get("real"):
        return f"its real path is {now['real']} now, not {recorded.get('real')} (a link on the way was changed)"
    if (now["dev"], now["ino"]) != (recorded.get("dev"), recorded.get("ino")):
        return "it is another directory than the one tfgpu-install made (its device or inode differ)"
    if "token" in recorded and _token(path) != recorded.get("token"):
        return f"it does not hold the marker tfgpu-install wrote into it ({MARKER})"
    return None


def looks_like_env(path: Path) -> bool:
    """For records older than identities: a directory (not a link) with a venv's or conda's own file."""
    return dir_identity(path) is not None and (
        os.path.isfile(path / "pyvenv.cfg") or os.path.isdir(path / "conda-meta"))
