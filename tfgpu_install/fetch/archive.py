"""Safe extraction: every member checked, written into a fresh staging dir, then one atomic rename.

The rules, the same for tar, tar.gz, tar.xz and zip on every supported Python (tarfile only
parses; its extraction and its `data` filter are not used, so a Python without the filter
behaves the same):
- no absolute member names, no `..` components, no NUL;
- nothing is created through a link: each parent directory is opened from the staging dir's
  descriptor with O_NOFOLLOW, files are created with O_CREAT|O_EXCL|O_NOFOLLOW, and a member
  that exists already is replaced (unlink + create), never written through;
- symlinks only with relative targets that cannot leave the tree whatever the archive holds
  (archive_members.check_symlink), checked again against the tree as built so far, and every
  link of the tree that gets placed once more (content_root);
- hard links only to regular files extracted before them;
- regular files, directories and links only: device nodes, FIFOs and the like are refused;
- limits on members, total size and compression ratio, checked from the headers before a
  byte is written and again while writing (a header may lie);
- modes are tamed (no setuid/setgid/sticky, no group/other write), owners not restored.
A refused archive leaves nothing behind: the staging dir is removed.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Optional, Union

from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.fetch.archive_members import (
    ArchiveError,
    Limits,
    Member,
    UnsafeArchive,
    human,
    open_member,
    tar_members,
    unreadable,
    unsafe,
    walk_links,
    zip_members,
)

__all__ = ["ArchiveError", "UnsafeArchive", "check_archive_input", "content_root", "extract", "extract_into", "place"]

# A real cuDNN 9 x86_64 archive is ~0.9 GB compressed, ~1 GB unpacked, a few dozen members
# (tests/fixtures/cudnn/redistrib_9.8.0.json); xz on shared libraries gains a few times.
MAX_MEMBERS = 100_000
MAX_TOTAL_BYTES = 16 << 30  # 16 GiB
MAX_RATIO = 100  # uncompressed : compressed, over the whole archive
RATIO_FLOOR_BYTES = 64 << 20  # small archives may compress as well as they like
_MAX_LINK_HOPS = 40  # the kernel's own limit (MAXSYMLINKS)
_CHUNK = 1 << 16  # 64 KiB, as shutil.copyfileobj: bigger reads cost page faults (mmap per chunk)

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

# Magic numbers of the formats we read (a plain tar says "ustar" at offset 257).
_MAGIC = ((b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"), (b"\xfd7zXZ\x00", "xz"),
          (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"))


def limits() -> Limits:
    """The module's limits, read when used (tests lower them)."""
    return Limits(MAX_MEMBERS, MAX_TOTAL_BYTES, MAX_RATIO, RATIO_FLOOR_BYTES)


def check_archive_input(path: Path) -> None:
    """Cheap checks of a user-given archive before anything is changed: there, a file,
    readable, and starting like a format we unpack. Raises ArchiveError (exit 5)."""
    path = Path(path).expanduser()
    hint = "check the path given to --cudnn-archive"
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ArchiveError(f"cuDNN archive not found: {path}", hint, ref="cudnn-archive-missing") from None
    except OSError as exc:
        raise ArchiveError(f"cannot read the cuDNN archive {path}: {exc.strerror}", hint,
                           ref="cudnn-archive-unreadable") from exc
    if not stat.S_ISREG(st.st_mode):
        raise ArchiveError(f"the cuDNN archive {path} is not a file", hint, ref="cudnn-archive-missing")
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise ArchiveError(
            f"cannot read the cuDNN archive {path}: {exc.strerror}",
            f"make it readable by this user (chmod u+r {path}) or copy it somewhere readable",
            ref="cudnn-archive-unreadable",
        ) from exc
    if any(head.startswith(magic) for magic, _ in _MAGIC) or head[257:262] == b"ustar":
        return
    raise ArchiveError(
        f"{path} is not a .tar.xz/.tar.gz/.zip archive (it starts with {head[:8]!r})",
        "pass the cuDNN archive NVIDIA publishes (cudnn-linux-<arch>-<version>_cuda<N>-archive.tar.xz)",
        ref="not-an-archive",
    )


def vet(archive: Path) -> int:
    """Every member's name, kind, link target and size checked (the checks extract() makes
    first), without writing anything: hostile members are found before any step runs, also
    in a dry run. Reads the archive once (a .tar.xz is decompressed); returns the member count."""
    archive = Path(archive)
    try:
        reader: Union[tarfile.TarFile, zipfile.ZipFile] = (
            zipfile.ZipFile(archive) if zipfile.is_zipfile(archive) else tarfile.open(archive, "r:*"))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise unreadable(archive, exc) from exc
    with reader:
        try:
            if isinstance(reader, zipfile.ZipFile):
                return len(zip_members(archive, reader, limits()))
            return len(tar_members(archive, reader, limits()))
        except (tarfile.TarError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
            raise unreadable(archive, exc) from exc


def extract(archive: Path, staging_parent: Path) -> Path:
    """Extract `archive` into a new staging dir under `staging_parent` (same filesystem as
    the final place, so the later rename is atomic). Returns the staging dir."""
    archive = Path(archive)
    if not archive.is_file():
        raise ArchiveError(f"archive not found: {archive}", "check the path given to --cudnn-archive")
    reader: Union[tarfile.TarFile, zipfile.ZipFile]
    try:
        reader = zipfile.ZipFile(archive) if zipfile.is_zipfile(archive) else tarfile.open(archive, "r:*")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise unreadable(archive, exc) from exc
    with reader:
        if isinstance(reader, zipfile.ZipFile):
            members = zip_members(archive, reader, limits())
        else:
            members = tar_members(archive, reader, limits())
        staging_parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tfgpu-staging-", dir=str(staging_parent)))
        try:
            _Builder(archive, staging, reader).build(members)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return staging


class _Builder:
    """Writes members under `root` through directory descriptors, never following a link."""

    def __init__(self, archive: Path, root: Path, reader: Union[tarfile.TarFile, zipfile.ZipFile]) -> None:
        self.archive, self.root, self.reader = archive, root, reader
        self.written = 0

    def build(self, members: list[Member]) -> None:
        root_fd = os.open(self.root, _DIR)
        try:
            for member in members:
                try:
                    self._put(root_fd, member)
                except ArchiveError:
                    raise
                except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, RuntimeError,
                        NotImplementedError, ValueError) as exc:
                    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise EnvironmentProblem(
                            f"no space left on {self.root.parent} while unpacking {self.archive.name}",
                            f"free disk space there (cuDNN needs about {human(_declared(members))}) and run again",
                            ref="no-space",
                        ) from exc
                    raise unreadable(self.archive, exc) from exc
        finally:
            os.close(root_fd)

    def _put(self, root_fd: int, m: Member) -> None:
        parent_fd = self._open_dirs(root_fd, m, m.parts[:-1])
        name = m.parts[-1]
        try:
            if m.kind == "dir":
                fd = self._open_dirs(parent_fd, m, (name,))
                try:
                    os.fchmod(fd, (m.mode & 0o755) | 0o700)
                finally:
                    os.close(fd)
                return
            self._clear(parent_fd, m, name)
            if m.kind == "symlink":
                assert m.target is not None
                if _resolve(self.root, list(m.parts[:-1]), m.target) is None:
                    raise unsafe(self.archive, m.name, "is a symlink leading out of the tree or in a loop "
                                                       f"({m.target!r})")
                os.symlink(m.target, name, dir_fd=parent_fd)
            elif m.kind == "hardlink":
                self._hardlink(root_fd, parent_fd, m, name)
            else:
                self._write(parent_fd, m, name)
        finally:
            if parent_fd != root_fd:
                os.close(parent_fd)

    def _open_dirs(self, start_fd: int, m: Member, parts: tuple[str, ...]) -> int:
        """A descriptor of start/parts..., creating missing dirs; refuses a link or a file on the way."""
        fd = start_fd
        try:
            for part in parts:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    kind = "a link" if stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode) else "a file"
                    raise unsafe(self.archive, m.name, f"would be written through {kind} ({part!r})") from exc
                if fd != start_fd:
                    os.close(fd)
                fd = nxt
        except BaseException:
            if fd != start_fd:
                os.close(fd)
            raise
        return fd

    def _clear(self, parent_fd: int, m: Member, name: str) -> None:
        """A member that exists already is replaced: unlinked, never opened."""
        try:
            st = os.lstat(name, dir_fd=parent_fd)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise unsafe(self.archive, m.name, "would replace a directory of the archive")
        os.unlink(name, dir_fd=parent_fd)

    def _hardlink(self, root_fd: int, parent_fd: int, m: Member, name: str) -> None:
        assert m.target is not None
        src = tuple(m.target.split("/"))
        src_fd = self._open_dirs(root_fd, m, src[:-1])
        try:
            try:
                st = os.lstat(src[-1], dir_fd=src_fd)
            except FileNotFoundError:
                raise unsafe(self.archive, m.name, f"is a hard link to {m.target!r}, not extracted before it") from None
            if not stat.S_ISREG(st.st_mode):
                raise unsafe(self.archive, m.name, f"is a hard link to {m.target!r}, which is not a regular file")
            os.link(src[-1], name, src_dir_fd=src_fd, dst_dir_fd=parent_fd, follow_symlinks=False)
        finally:
            if src_fd != root_fd:
                os.close(src_fd)

    def _write(self, parent_fd: int, m: Member, name: str) -> None:
        fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent_fd)
        with os.fdopen(fd, "wb") as out, open_member(self.reader, m) as src:
            got = 0
            while True:
                block = src.read(_CHUNK)
                if not block:
                    break
                got += len(block)
                self.written += len(block)
                if got > m.size or self.written > MAX_TOTAL_BYTES:
                    raise unsafe(self.archive, m.name, f"holds more data than its header says ({human(m.size)})")
                out.write(block)
            os.fchmod(out.fileno(), (m.mode & 0o755) | 0o600)
            if m.mtime is not None:
                os.utime(out.fileno(), (m.mtime, m.mtime))


def _declared(members: list[Member]) -> int:
    return sum(m.size for m in members if m.kind == "file")


def _resolve(root: Path, where: list[str], target: str, hops: int = 0) -> Optional[list[str]]:
    """Where `target`, as a link in root/where..., leads on the tree as built so far: the
    real path parts under root, or None when it leaves root (or loops)."""
    at = list(where)
    for comp in target.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if not at:
                return None
            at.pop()
            continue
        at.append(comp)
        here = root.joinpath(*at)
        if here.is_symlink():
            hops += 1
            nxt = os.readlink(here)
            if hops > _MAX_LINK_HOPS or nxt.startswith("/"):
                return None
            found = _resolve(root, at[:-1], nxt, hops)
            if found is None:
                return None
            at = found
    return at


def content_root(staging: Path, archive: Optional[Path] = None) -> Path:
    """The tree's real root: NVIDIA archives wrap everything in one top-level folder
    (cudnn-linux-x86_64-9.x.y.z_cuda12-archive/), the oldest ones in cuda/. Every link in it
    must lead inside it: once it is renamed into place, `../x` would point beside it."""
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
        break
    for link, target in walk_links(root):
        rel = link.relative_to(root)
        if _resolve(root, list(rel.parts[:-1]), target) is None:
            label = archive.name if archive is not None else staging.name
            raise unsafe(Path(label), str(rel), f"is a symlink leading out of the archive's top folder "
                         f"or in a loop ({target!r})")
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
        place(content_root(staging, archive), dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
