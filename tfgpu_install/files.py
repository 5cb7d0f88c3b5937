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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Optional, Union

from tfgpu_install.errors import disk_full, is_disk_full

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
    """Write `data` to `path` atomically. Keeps the existing file's owner and group, and its
    mode unless `mode` is given (PermissionError when the owner cannot be kept: a replaced
    file must not silently change hands)."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    try:
        old: Optional[os.stat_result] = path.stat()
    except FileNotFoundError:
        old = None
    if mode is None:
        mode = old.st_mode & 0o7777 if old is not None else 0o644
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # here: the no-op answer imports this module and writes nothing

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
            made = os.fstat(fh.fileno())
            if old is not None and (made.st_uid, made.st_gid) != (old.st_uid, old.st_gid):
                os.fchown(fh.fileno(), old.st_uid, old.st_gid)
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


def edit_target(path: Path) -> Path:
    """The file an edit of `path` changes: a symlink's target (a dotfiles repo's file), so the
    link stays a link; `path` itself otherwise."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def remove_file(path: Path) -> bool:
    """Remove a file if present; True when something was removed."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return False
    _fsync_dir(Path(path).parent)
    return True


# --- marked blocks -------------------------------------------------------------------------
#
# A block is the lines from `# >>> tfgpu-install TAG >>>` to `# <<< tfgpu-install TAG <<<`
# (TAG names the block: an env id in a user's rc, "deactivate" inside bin/activate; empty in
# the blocks earlier versions wrote). Files are edited as bytes, so a latin-1 rc keeps every
# byte; a block is written with the line ending of the file (CRLF stays CRLF). A begin marker
# ending in " +nl" means we added the line break before it (the file did not end in one), so
# removing the block takes that break away too. Any marker out of place (a begin without its
# end, an end without its begin, blocks inside blocks) is a MarkerError: nothing is edited.

_MARKER = re.compile(
    rb"^(?P<indent>[ \t]*)(?P<comment>[^\s]+) (?P<arrow>>>>|<<<) " + MARK.encode()
    + rb"(?: (?P<tag>[^\s<>]+))? (?P=arrow)(?P<nl> \+nl)?[ \t]*(?P<eol>\r?\n)?\Z"
)


class MarkerError(ValueError):
    """The file's tfgpu-install markers do not pair up; `line` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True)
class BlockSpan:
    tag: str
    start: int  # first byte of the block: its own leading line break when `plus_nl`
    begin: int  # first byte of the begin marker's line
    end: int  # one past the end marker's line ending
    line: int  # 1-based line of the begin marker
    newline: bytes  # the begin marker's line ending: the block's own
    plus_nl: bool  # the line break before the block is ours (inside start..begin)


def _lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, line with its "\\n") for each line; a final line may lack one."""
    pos = 0
    while pos < len(data):
        cut = data.find(b"\n", pos)
        cut = len(data) if cut < 0 else cut + 1
        yield pos, data[pos:cut]
        pos = cut


def scan_blocks(data: bytes) -> list[BlockSpan]:
    """Every marked block in `data`, in order; MarkerError when the markers do not pair up."""
    spans: list[BlockSpan] = []
    opened: Optional[BlockSpan] = None  # its `end` is not known yet
    for number, (pos, line) in enumerate(_lines(data), start=1):
        m = _MARKER.match(line)
        if m is None:
            continue
        tag = (m.group("tag") or b"").decode("ascii", "replace")
        name = f"`{MARK} {tag}`".replace(" `", "`")
        if m.group("arrow") == b">>>":
            if opened is not None:
                raise MarkerError(f"begin marker of {name} inside the block opened on line {opened.line}", number)
            newline = m.group("eol") or b"\n"
            start = pos
            if m.group("nl") is not None and data[:pos].endswith(b"\n"):
                start -= len(newline) if data[:pos].endswith(newline) else 1
            opened = BlockSpan(tag, start, pos, -1, number, newline, start < pos)
        else:
            if opened is None or opened.tag != tag:
                raise MarkerError(f"end marker of {name} without its begin marker", number)
            spans.append(replace(opened, end=pos + len(line)))
            opened = None
    if opened is not None:
        name = f"`{MARK} {opened.tag}`".replace(" `", "`")
        raise MarkerError(f"begin marker of {name} without its end marker", opened.line)
    return spans


def find_block(data: bytes, tag: str = "") -> Optional[BlockSpan]:
    return next((s for s in scan_blocks(data) if s.tag == tag), None)


def newline_of(data: bytes) -> bytes:
    """The file's own line ending: that of its first line (LF for a file with none)."""
    cut = data.find(b"\n")
    return b"\r\n" if cut > 0 and data[cut - 1:cut] == b"\r" else b"\n"


def markers(block: str = "", comment: str = "#") -> tuple[str, str]:
    tag = f"{MARK} {block}".strip()
    return f"{comment} >>> {tag} >>>", f"{comment} <<< {tag} <<<"


def render_block_bytes(body: str, block: str = "", comment: str = "#", indent: str = "",
                       newline: bytes = b"\n") -> bytes:
    begin, end = markers(block, comment)
    lines = [indent + begin]
    lines += [(indent + ln) if ln else "" for ln in body.rstrip("\n").split("\n")]
    lines.append(indent + end)
    return newline.join(ln.encode("utf-8", "surrogateescape") for ln in lines) + newline


def _plus_nl(block: bytes, newline: bytes) -> bytes:
    """`block` in its " +nl" form: our line break first, then a begin marker saying so."""
    first, _, rest = block.partition(newline)
    return newline + first + b" +nl" + newline + rest


def block_bytes(data: bytes, span: BlockSpan) -> bytes:
    """The block as it would be written fresh: without the " +nl" bookkeeping."""
    first, nl, rest = data[span.begin:span.end].partition(b"\n")
    m = _MARKER.match(first + nl)
    if m is not None and m.group("nl") is not None:
        first = first[:m.start("nl")] + first[m.end("nl"):]
    return first + nl + rest


def replace_block(data: bytes, span: BlockSpan, new: bytes) -> bytes:
    """`data` with the block at `span` replaced by `new` (b"": removed). `new` takes the old
    block's " +nl" form; a removed " +nl" block hands its line break to the block of ours right
    after it, or leaves it in place when a user's line follows (it then needs its own line)."""
    head, tail = data[:span.start], data[span.end:]
    if not span.plus_nl:
        return head + new + tail
    if new:
        return head + _plus_nl(new, span.newline) + tail
    following = next(iter(scan_blocks(tail)), None)
    if following is None and not tail:
        return head
    if following is not None and following.start == 0 and not following.plus_nl:
        return head + _plus_nl(block_bytes(tail, following), following.newline) + tail[following.end:]
    return head + span.newline + tail


def put_block(data: bytes, body: str, block: str = "", comment: str = "#",
              after: Optional[str] = None, indent: str = "") -> tuple[bytes, Optional[bytes]]:
    """(`data` with block `block` holding `body`, the block that was there before or None).
    Replaced in place when present, else inserted after the first line matching regex
    `after`, else appended (behind a line break of ours when the file lacks a final one)."""
    old = find_block(data, block)
    newline = old.newline if old is not None else newline_of(data)
    new = render_block_bytes(body, block, comment, indent, newline)
    if old is not None:
        return replace_block(data, old, new), block_bytes(data, old)
    if after is not None:
        m = re.search(after.encode(), data, re.M)
        if m is not None:
            eol = data.find(b"\n", m.end())
            if eol >= 0:
                return data[:eol + 1] + new + data[eol + 1:], None
    if data and not data.endswith(b"\n"):
        return data + _plus_nl(new, newline), None
    return data + new, None


def _surrogate(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def read_block(text: str, block: str = "", comment: str = "#") -> Optional[str]:
    """The full marked block (markers included) as it stands in `text`, or None."""
    data = _surrogate(text)
    span = find_block(data, block)
    return None if span is None else block_bytes(data, span).decode("utf-8", "surrogateescape")


def set_block(text: str, body: str, block: str = "", comment: str = "#",
              after: Optional[str] = None, indent: str = "") -> str:
    """`text` with our block holding `body` (see put_block)."""
    return put_block(_surrogate(text), body, block, comment, after, indent)[0].decode("utf-8", "surrogateescape")


def remove_block(text: str, block: str = "", comment: str = "#") -> str:
    """`text` without our block (and nothing else changed)."""
    data = _surrogate(text)
    span = find_block(data, block)
    return text if span is None else replace_block(data, span, b"").decode("utf-8", "surrogateescape")


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
