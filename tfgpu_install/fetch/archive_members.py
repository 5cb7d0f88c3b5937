"""An archive's members as plain data, every name and link target checked, limits enforced
while the headers are read (before any byte is written).

tar (plain, .gz, .bz2, .xz) and zip give the same `Member` list, so extraction has one code
path for every format and every Python (tarfile is used to parse only: its extraction and
its `data` filter, absent before 3.9.17 / 3.10.12 / 3.11.4, are never relied on).
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Optional, Union

from tfgpu_install.errors import BadInputError

MAX_LINK_TARGET = 4096  # bytes: PATH_MAX; a zip "symlink" member holds its target as data


class ArchiveError(BadInputError):
    ref = "bad-archive"


class UnsafeArchive(ArchiveError):
    ref = "unsafe-archive"


@dataclass(frozen=True)
class Limits:
    """What an archive may unpack to. The defaults (tfgpu_install.fetch.archive) pass a real cuDNN
    archive many times over; a compression bomb or a flood of members fails before writing."""

    max_members: int
    max_total_bytes: int
    max_ratio: int  # uncompressed total / archive size
    ratio_floor_bytes: int  # below this total the ratio is not checked (tiny archives of zeros)


@dataclass(frozen=True)
class Member:
    """One member: `parts` is its normalized relative path (never empty, no '.', '..' or '/');
    `target` a symlink's target as stored, or a hard link's source as path parts joined by '/'."""

    name: str  # as in the archive, for messages
    parts: tuple[str, ...]
    kind: str  # file | dir | symlink | hardlink
    size: int
    mode: int
    mtime: Optional[float]
    target: Optional[str]
    source: Union[tarfile.TarInfo, zipfile.ZipInfo]


def unsafe(archive: Path, member: str, why: str, ref: Optional[str] = None) -> UnsafeArchive:
    return UnsafeArchive(
        f"refusing to extract {archive.name}: member {member!r} {why}",
        "the archive is damaged or was tampered with; download it again from NVIDIA "
        "(or check it against the sha256 NVIDIA publishes) before retrying",
        ref=ref,
    )


def unreadable(archive: Path, exc: BaseException) -> ArchiveError:
    return ArchiveError(
        f"cannot read {archive}: it is truncated or not a .tar.xz/.tar.gz/.zip archive ({exc})",
        "download the archive again (its sha256 should match NVIDIA's published one)",
    )


def human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def name_parts(archive: Path, name: str) -> tuple[str, ...]:
    """The normalized relative path of a member name; refuses absolute names, drive letters,
    '..' components and NUL. Backslashes count as separators (zips made on Windows)."""
    if "\x00" in name:
        raise unsafe(archive, name, "has a NUL byte in its name")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise unsafe(archive, name, "has an absolute path")
    parts = tuple(p for p in name.replace("\\", "/").split("/") if p not in ("", "."))
    if ".." in parts:
        raise unsafe(archive, name, "climbs out of the archive with '..'")
    return parts


def check_symlink(archive: Path, member: str, parts: tuple[str, ...], target: str) -> None:
    """A symlink target that can only ever resolve inside the tree, whatever else the archive
    holds: relative, its '..' all at the start and no more of them than the link's own depth
    (the link sits in real directories: nothing is created through a link), then plain names.
    `a -> s/..` is refused: `s` may become a link later, and `..` after it climbs from there."""
    if not target or "\x00" in target or len(target.encode("utf-8", "surrogateescape")) > MAX_LINK_TARGET:
        raise unsafe(archive, member, "is a symlink with an empty, NUL-holding or over-long target")
    if target.startswith("/"):
        raise unsafe(archive, member, f"is a symlink to the absolute path {target!r}")
    comps = [c for c in target.split("/") if c not in ("", ".")]
    climbs = 0
    while climbs < len(comps) and comps[climbs] == "..":
        climbs += 1
    if ".." in comps[climbs:]:
        raise unsafe(archive, member, f"is a symlink whose target climbs with '..' after a name ({target!r})")
    if climbs > len(parts) - 1:
        raise unsafe(archive, member, f"is a symlink leaving the tree ({target!r})")


def _checked(archive: Path, name: str, kind: str, size: int, mode: int, mtime: Optional[float],
             target: Optional[str], source: Union[tarfile.TarInfo, zipfile.ZipInfo]) -> Optional[Member]:
    """The Member, None for a member that names the root itself ('./'), or UnsafeArchive."""
    if kind == "other":
        raise unsafe(archive, name, "is a device node, FIFO or other special file")
    parts = name_parts(archive, name)
    if not parts:
        if kind == "dir":
            return None
        raise unsafe(archive, name, "has an empty name")
    if kind == "symlink":
        assert target is not None
        check_symlink(archive, name, parts, target)
    elif kind == "hardlink":
        assert target is not None
        if target.startswith(("/", "\\")):
            raise unsafe(archive, name, f"is a hard link to the absolute path {target!r}")
        src = name_parts(archive, target)
        if not src:
            raise unsafe(archive, name, "is a hard link to the archive's root")
        target = "/".join(src)
    return Member(name, parts, kind, size, mode, mtime, target, source)


class _Totals:
    def __init__(self, archive: Path, limits: Limits) -> None:
        self.archive, self.limits = archive, limits
        self.members = 0
        self.bytes = 0
        self.archive_size = max(archive.stat().st_size, 1)

    def add(self, size: int) -> None:
        lim, arc = self.limits, self.archive
        self.members += 1
        self.bytes += max(size, 0)
        if self.members > lim.max_members:
            raise UnsafeArchive(
                f"refusing to extract {arc.name}: it has more than {lim.max_members} members",
                "a cuDNN archive has a few dozen; this one is damaged or hostile", ref="archive-too-many-members")
        if self.bytes > lim.max_total_bytes:
            raise UnsafeArchive(
                f"refusing to extract {arc.name}: it unpacks to more than {human(lim.max_total_bytes)} "
                "uncompressed", "a cuDNN archive unpacks to about 1 GB; this one is damaged or hostile",
                ref="archive-too-large")
        ratio = self.bytes / self.archive_size
        if self.bytes > lim.ratio_floor_bytes and ratio > lim.max_ratio:
            raise UnsafeArchive(
                f"refusing to extract {arc.name}: {human(self.archive_size)} would unpack to at least "
                f"{human(self.bytes)} (compression ratio {ratio:.0f}:1, limit {lim.max_ratio}:1)",
                "a compression bomb, or not a cuDNN archive; download it again from NVIDIA",
                ref="archive-ratio")


# --- tar -----------------------------------------------------------------------------------


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


def tar_members(archive: Path, tf: tarfile.TarFile, limits: Limits) -> list[Member]:
    totals = _Totals(archive, limits)
    out: list[Member] = []
    while True:
        try:
            m = tf.next()
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:  # lzma/zlib errors too
            raise unreadable(archive, exc) from exc
        if m is None:
            return out
        kind = _tar_kind(m)
        totals.add(m.size if kind == "file" else 0)
        member = _checked(archive, m.name, kind, m.size, m.mode, float(m.mtime),
                          m.linkname if kind in ("symlink", "hardlink") else None, m)
        if member is not None:
            out.append(member)


# --- zip -----------------------------------------------------------------------------------


def _zip_kind(info: zipfile.ZipInfo) -> str:
    mode = info.external_attr >> 16
    if info.filename.endswith("/") or (mode and stat.S_ISDIR(mode)):  # is_dir() fails on ""
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    # No type bits at all (Windows tools; Python's writestr(name) writes bare 0o600) is a file.
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        return "other"
    return "file"


def zip_members(archive: Path, zf: zipfile.ZipFile, limits: Limits) -> list[Member]:
    totals = _Totals(archive, limits)
    out: list[Member] = []
    for info in zf.infolist():
        kind = _zip_kind(info)
        totals.add(info.file_size if kind == "file" else 0)
        target = None
        if kind == "symlink":
            if info.file_size > MAX_LINK_TARGET:
                raise unsafe(archive, info.filename, "is a symlink with an over-long target")
            try:
                target = zf.read(info).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise unsafe(archive, info.filename, "is a symlink whose target is not UTF-8") from exc
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, EOFError) as exc:
                raise unreadable(archive, exc) from exc
        mode = (info.external_attr >> 16) & 0o7777
        member = _checked(archive, info.filename, kind, info.file_size, mode or 0o644, None, target, info)
        if member is not None:
            out.append(member)
    return out


def open_member(reader: Union[tarfile.TarFile, zipfile.ZipFile], member: Member) -> IO[bytes]:
    if isinstance(reader, zipfile.ZipFile):
        assert isinstance(member.source, zipfile.ZipInfo)
        return reader.open(member.source)
    assert isinstance(member.source, tarfile.TarInfo)
    fh = reader.extractfile(member.source)
    assert fh is not None  # a regular file always has data
    return fh


def walk_links(root: Path) -> Iterator[tuple[Path, str]]:
    """(path, target) of every symlink under `root` (not following links)."""
    stack = [root]
    while stack:
        here = stack.pop()
        for entry in sorted(here.iterdir()):
            if entry.is_symlink():
                yield entry, os.readlink(entry)
            elif entry.is_dir():
                stack.append(entry)
