"""File operations every writing step shares: atomic writes, marked blocks, tree hashes.

A kill at any instant must leave either the old file or the new one, never a torn
one: every write goes to a temp file in the same directory, is fsynced, then
os.replace()d over the target (and the directory fsynced so the rename survives).
Marked blocks are how we edit files we do not own (activate scripts, a user's
shell rc, ld.so.conf.d): only the lines between our markers ever change.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Optional, Union

from installer.errors import disk_full, is_disk_full

MARK = "tfgpu-install"


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def atomic_write(path: Path, data: Union[str, bytes], mode: Optional[int] = None) -> None:
    """Write `data` to `path` atomically. Keeps the existing file's mode unless `mode` is given."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(path, exc, len(payload), "writing it") from exc
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if is_disk_full(exc):  # the old file (if any) is untouched; the temp file is gone
            raise disk_full(path, exc, len(payload), "writing it") from exc
        raise
    _fsync_dir(path.parent)


def remove_file(path: Path) -> bool:
    """Remove a file if present; True when something was removed."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return False
    _fsync_dir(Path(path).parent)
    return True


# --- marked blocks -------------------------------------------------------------------------


def markers(block: str = "", comment: str = "#") -> tuple[str, str]:
    tag = f"{MARK} {block}".strip()
    return f"{comment} >>> {tag} >>>", f"{comment} <<< {tag} <<<"


def _block_re(block: str, comment: str) -> "re.Pattern[str]":
    begin, end = markers(block, comment)
    # The whole lines, including leading indentation and the final newline, so removal
    # gives back the original bytes exactly.
    # A begin marker ending in " +nl" means we added the line break before it (the file
    # did not end in one), so removal takes that break away too.
    return re.compile(
        rf"(?:\n(?=[ \t]*{re.escape(begin)} \+nl\n))?"
        rf"^[ \t]*{re.escape(begin)}(?: \+nl)?\n.*?^[ \t]*{re.escape(end)}[ \t]*(?:\n|\Z)",
        re.M | re.S,
    )


def render_block(body: str, block: str = "", comment: str = "#", indent: str = "") -> str:
    begin, end = markers(block, comment)
    lines = [indent + begin]
    lines += [(indent + ln) if ln else "" for ln in body.rstrip("\n").split("\n")]
    lines.append(indent + end)
    return "\n".join(lines) + "\n"


def read_block(text: str, block: str = "", comment: str = "#") -> Optional[str]:
    """The full marked block (markers included) as it stands in `text`, or None."""
    m = _block_re(block, comment).search(text)
    if not m:
        return None
    # Normalised: the "+nl" bookkeeping is not part of the content.
    return m.group(0).lstrip("\n").replace(" +nl\n", "\n", 1)


def _keep_nl(old: str, new: str) -> str:
    """A replacement for block `old` that keeps its "+nl" form (see _block_re)."""
    if not old.startswith("\n"):
        return new
    first, rest = new.split("\n", 1)
    return "\n" + first + " +nl\n" + rest


def set_block(
    text: str,
    body: str,
    block: str = "",
    comment: str = "#",
    after: Optional[str] = None,
    indent: str = "",
) -> str:
    """`text` with our block holding `body`: replaced in place when present, otherwise
    inserted after the first line matching regex `after` (or appended at the end)."""
    new = render_block(body, block, comment, indent)
    pattern = _block_re(block, comment)
    if pattern.search(text):
        return pattern.sub(lambda m: _keep_nl(m.group(0), new), text, count=1)
    if after is not None:
        m = re.search(after, text, re.M)
        if m is not None:
            eol = text.find("\n", m.end())
            cut = len(text) if eol < 0 else eol + 1
            head = text[:cut] if eol >= 0 else text + "\n"
            return head + new + text[cut:]
    if text and not text.endswith("\n"):
        # Appending needs a line break; the " +nl" mark lets remove_block take it back.
        return text + _keep_nl("\n", new)
    return text + new


def remove_block(text: str, block: str = "", comment: str = "#") -> str:
    """`text` without our block (and nothing else changed)."""
    return _block_re(block, comment).sub("", text, count=1)


# --- hashes --------------------------------------------------------------------------------


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for part in iter(lambda: fh.read(chunk), b""):
            h.update(part)
    return h.hexdigest()


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> "file:<sha256>:<mode>" / "link:<target>" / "dir:<mode>" for everything
    under `root` (not following links). Two trees are identical when their digests are equal."""
    root = Path(root)
    out: dict[str, str] = {}
    if not root.exists() and not root.is_symlink():
        return out
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dpath = Path(dirpath)
        for name in sorted(dirnames + filenames):
            p = dpath / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if p.is_symlink():
                out[rel] = f"link:{os.readlink(p)}"
            elif p.is_dir():
                out[rel] = f"dir:{oct(st.st_mode & 0o7777)}"
            elif p.is_file():
                out[rel] = f"file:{sha256_file(p)}:{oct(st.st_mode & 0o7777)}"
            else:
                out[rel] = "other"
    return out


def tree_sha256(root: Path) -> str:
    """One sha256 over tree_digest(root): equal trees, equal hashes."""
    h = hashlib.sha256()
    for rel, val in sorted(tree_digest(root).items()):
        h.update(f"{rel}\0{val}\n".encode())
    return h.hexdigest()


def replace_symlink(link: Path, target: str) -> None:
    """Point `link` at `target` atomically: readers see the old link or the new one, never none."""
    tmp = link.with_name(f".{link.name}.tfgpu-tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, link)
