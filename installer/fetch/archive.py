"""Safe extraction: every member checked before anything is written, then one atomic rename.

The rules (the same on every Python: our own checks run first, then tarfile's `data`
filter where this Python has it, as a second net):
- no absolute member names, no `..` components, nothing written through a link;
- symlinks only to targets inside the tree (relative, resolving under the root);
- hard links only to other members inside the tree;
- regular files, directories and links only: device nodes, FIFOs and the like are refused;
- modes are tamed (no setuid/setgid/sticky, no group/other write), owners not restored.
A refused archive leaves nothing behind: the staging dir is removed.
"""

from __future__ import annotations

import copy
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

from installer.errors import BadInputError


class ArchiveError(BadInputError):
    ref = "bad-archive"


class UnsafeArchive(ArchiveError):
    ref = "unsafe-archive"


def _unsafe(archive: Path, member: str, why: str) -> UnsafeArchive:
    return UnsafeArchive(
        f"refusing to extract {archive.name}: member {member!r} {why}",
        "the archive is damaged or was tampered with; download it again from NVIDIA "
        "(or check it against the sha256 NVIDIA publishes) before retrying",
    )


def _check_name(archive: Path, name: str) -> str:
    """The normalized relative name, or an UnsafeArchive for a name that would escape."""
    if not name or name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise _unsafe(archive, name, "has an absolute path")
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        raise _unsafe(archive, name, "climbs out of the archive with '..'")
    norm = posixpath.normpath("/".join(p for p in parts if p not in ("", ".")) or ".")
    return norm


def _inside(target: str) -> bool:
    return target != ".." and not target.startswith("../") and not target.startswith("/")


def _check_members(archive: Path, entries: list[tuple[str, str, Optional[str]]]) -> None:
    """entries: (name, kind, link target) with kind in file/dir/symlink/hardlink/other."""
    links: set[str] = set()
    names: set[str] = set()
    for name, kind, target in entries:
        norm = _check_name(archive, name)
        if kind == "other":
            raise _unsafe(archive, name, "is a device node, FIFO or other special file")
        # Nothing may be written through a link that an earlier member planted.
        parent = posixpath.dirname(norm)
        while parent not in ("", "."):
            if parent in links:
                raise _unsafe(archive, name, f"would be written through the link {parent!r}")
            parent = posixpath.dirname(parent)
        if kind == "symlink":
            assert target is not None
            if target.startswith("/"):
                raise _unsafe(archive, name, f"is a symlink to the absolute path {target!r}")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(norm), target))
            if not _inside(resolved):
                raise _unsafe(archive, name, f"is a symlink leaving the tree ({target!r})")
            links.add(norm)
        elif kind == "hardlink":
            assert target is not None
            tnorm = _check_name(archive, target)
            if tnorm not in names:
                raise _unsafe(archive, name, f"is a hard link to {target!r}, outside the archive")
        names.add(norm)


def _tar_kind(m: tarfile.TarInfo) -> str:
    if m.isreg():
        return "file"
    if m.isdir():
        return "dir"
    if m.issym():
        return "symlink"
    if m.islnk():
        return "hardlink"
    return "other"


def _tame(m: tarfile.TarInfo) -> tarfile.TarInfo:
    """What the data filter does to metadata, for Pythons without it."""
    m = copy.copy(m)
    m.uid = m.gid = 0
    m.uname = m.gname = ""
    if m.isreg() or m.isdir():
        m.mode = (m.mode & 0o755) | (0o700 if m.isdir() else 0o600)
    return m


def _extract_tar(archive: Path, dest: Path) -> None:
    try:
        tf = tarfile.open(archive, "r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise _bad(archive, exc) from exc
    with tf:
        try:
            members = tf.getmembers()
        except (tarfile.TarError, EOFError, OSError, Exception) as exc:  # lzma/zlib errors too
            raise _bad(archive, exc) from exc
        _check_members(archive, [(m.name, _tar_kind(m), m.linkname or None) for m in members])
        try:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, members=members, filter="data")
            else:  # Pythons before the filter (and its 3.9-3.11 backports)
                for m in members:
                    tf.extract(_tame(m), dest, set_attrs=not m.issym())
        except tarfile.FilterError as exc:
            raise _unsafe(archive, getattr(exc, "tarinfo", tarfile.TarInfo()).name, str(exc)) from exc
        except (tarfile.TarError, EOFError, OSError, Exception) as exc:
            if isinstance(exc, UnsafeArchive):
                raise
            raise _bad(archive, exc) from exc


def _zip_kind(info: zipfile.ZipInfo) -> str:
    mode = info.external_attr >> 16
    if info.is_dir():
        return "dir"
    if mode and stat.S_ISLNK(mode):
        return "symlink"
    if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "other"
    return "file"


def _extract_zip(archive: Path, dest: Path) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise _bad(archive, exc) from exc
    with zf:
        infos = zf.infolist()
        kinds = [_zip_kind(i) for i in infos]
        targets = [zf.read(i).decode("utf-8", "replace") if k == "symlink" else None for i, k in zip(infos, kinds)]
        _check_members(archive, [(i.filename, k, t) for i, k, t in zip(infos, kinds, targets)])
        try:
            for info, kind, target in zip(infos, kinds, targets):
                out = dest / _check_name(archive, info.filename)
                if kind == "dir":
                    out.mkdir(parents=True, exist_ok=True)
                elif kind == "symlink":
                    out.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(target or "", out)  # zipfile would write the target as a file
                else:
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    mode = (info.external_attr >> 16) & 0o755
                    os.chmod(out, (mode or 0o644) | 0o600)
        except (zipfile.BadZipFile, OSError, EOFError, Exception) as exc:
            raise _bad(archive, exc) from exc


def _bad(archive: Path, exc: BaseException) -> ArchiveError:
    return ArchiveError(
        f"cannot read {archive}: it is truncated or not a .tar.xz/.tar.gz/.zip archive ({exc})",
        "download the archive again (its sha256 should match NVIDIA's published one)",
    )


def extract(archive: Path, staging_parent: Path) -> Path:
    """Extract `archive` into a new staging dir under `staging_parent` (same filesystem as
    the final place, so the later rename is atomic). Returns the staging dir."""
    archive = Path(archive)
    if not archive.is_file():
        raise ArchiveError(f"archive not found: {archive}", "check the path given to --cudnn-archive")
    staging_parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tfgpu-staging-", dir=str(staging_parent)))
    try:
        if zipfile.is_zipfile(archive):
            _extract_zip(archive, staging)
        else:
            _extract_tar(archive, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def content_root(staging: Path) -> Path:
    """The tree's real root: NVIDIA archives wrap everything in one top-level folder
    (cudnn-linux-x86_64-9.x.y.z_cuda12-archive/), the oldest ones in cuda/."""
    root = staging
    while True:
        kids = [p for p in root.iterdir()]
        if (
            len(kids) == 1
            and kids[0].is_dir()
            and not kids[0].is_symlink()
            and kids[0].name not in ("lib", "lib64", "include", "bin")
        ):
            root = kids[0]
            continue
        return root


def place(tree: Path, dest: Path) -> None:
    """Rename `tree` to `dest` in one step; an empty `dest` directory is replaced,
    anything else there is refused (never merged into)."""
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise ArchiveError(f"{dest} exists and is not a directory", f"move {dest} away or choose another prefix")
    if dest.is_dir():
        if any(dest.iterdir()):
            raise ArchiveError(
                f"{dest} already exists and is not empty; refusing to mix two trees",
                f"remove {dest} or choose another --cudnn-prefix",
            )
        dest.rmdir()
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(tree, dest)


def extract_into(archive: Path, dest: Path) -> Path:
    """extract + content_root + place, staging beside `dest`; the staging dir is always gone after."""
    staging = extract(archive, dest.parent)
    try:
        place(content_root(staging), dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
