"""One file of the fleet's index being fetched from upstream into the controller's cache, followed by every
client that asks for it while it comes in (the first byte goes out as soon as it arrives, not after the
whole file).

- The bytes land in a `.part` file that this run alone holds (an exclusive flock): two runs never write or
  read one `.part`. A `.part` that no running controller holds (a run that ended mid-file) is resumed with
  `Range` from where it stopped, so a file that takes longer than one run is still fetched once.
- The sha256 the index page named is checked over the whole file at the end; only a file that matches is
  published into the cache (an atomic rename). Followers never get the last byte before that check: when it
  fails, their connection is closed short, so pip/uv see a truncated download, never a good one.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional

CHUNK = 1 << 20
# Read from upstream in pieces this big: followers get bytes as they come, not a megabyte at a time.
UPSTREAM_CHUNK = 64 << 10
MAX_FILE_BYTES = 8 << 30  # one file (the largest CUDA wheels are ~3 GB)
# A follower waits this long for the next bytes before it gives up on a stalled upstream.
STALL_S = 150.0


@dataclass(frozen=True)
class Target:
    url: str  # upstream (may carry the user's credentials: never shown)
    sha256: Optional[str]
    final: Path  # where the checked file is published


class DownloadFailed(OSError):
    """The fetch failed or its bytes were not what the page named (the message holds no URL)."""


def claim_part(final: Path) -> tuple[BinaryIO, Path]:
    """A `.part` for `final` that this run holds alone: a left-over one that no running controller holds
    (resumed), else a new one. The lock lives as long as the returned file object."""
    final.parent.mkdir(parents=True, exist_ok=True)
    for old in sorted(final.parent.glob(final.name + ".*.part")):
        try:
            fh = old.open("r+b")
        except OSError:
            continue
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                continue  # another run is writing it
            raise
        if os.fstat(fh.fileno()).st_uid != os.getuid() or not old.exists():
            fh.close()  # not ours, or published/removed between the glob and the lock
            continue
        fh.seek(0, os.SEEK_END)
        return fh, old
    path = final.parent / f"{final.name}.{uuid.uuid4().hex[:12]}.part"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    fh = os.fdopen(fd, "r+b")
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    return fh, path


class Download:
    """The fetch (a thread) and the state its followers wait on."""

    def __init__(self, target: Target, get: Callable[[str, Optional[int]], Any],
                 count: Callable[[int], None]) -> None:
        self.target = target
        self._get, self._count = get, count
        self.cond = threading.Condition()
        self.part: Optional[Path] = None
        self.started = False  # the response headers are in: total is known (or None: unknown length)
        self.total: Optional[int] = None
        self.written = 0  # bytes in the .part (a resumed part's old bytes included)
        self.done = False
        self.ok = False
        self.error: Optional[str] = None
        self.cancelled = False  # the run is ending: stop writing, keep the .part for the next run
        self.thread = threading.Thread(target=self._run, name="fleet-download", daemon=True)

    def start(self) -> "Download":
        self.thread.start()
        return self

    # --- the fetch --------------------------------------------------------------------------------

    def _run(self) -> None:
        fh: Optional[BinaryIO] = None
        keep_part = True
        try:
            fh, part = claim_part(self.target.final)
            with self.cond:
                self.part = part
            digest = hashlib.sha256()
            have = fh.tell()
            if have:
                fh.seek(0)
                while block := fh.read(CHUNK):
                    digest.update(block)
            r = self._get(self.target.url, have or None)
            try:
                if r.status_code == 206 and _range_start(r.headers.get("Content-Range")) == have:
                    total = _length(r.headers.get("Content-Length"))
                    total = None if total is None else have + total
                else:
                    if r.status_code != 200:
                        raise DownloadFailed(f"upstream answered HTTP {r.status_code}")
                    have, digest = 0, hashlib.sha256()
                    fh.seek(0)
                    fh.truncate()
                    total = _length(r.headers.get("Content-Length"))
                if total is not None and total > MAX_FILE_BYTES:
                    raise DownloadFailed(f"the file is larger than {MAX_FILE_BYTES} bytes")
                with self.cond:
                    self.started, self.total, self.written = True, total, have
                    self.cond.notify_all()
                for chunk in r.iter_content(UPSTREAM_CHUNK):
                    if self.cancelled:
                        raise DownloadFailed("the run ended before the file was in (a later run resumes it)")
                    if self.written + len(chunk) > (total if total is not None else MAX_FILE_BYTES):
                        raise DownloadFailed("upstream sent more bytes than it announced")
                    fh.write(chunk)
                    fh.flush()
                    digest.update(chunk)
                    self._count(len(chunk))
                    with self.cond:
                        self.written += len(chunk)
                        self.cond.notify_all()
            finally:
                r.close()
            if total is not None and self.written != total:
                raise DownloadFailed(f"upstream sent {self.written} of {total} bytes")
            got = digest.hexdigest()
            if self.target.sha256 and got != self.target.sha256:
                keep_part = False
                raise DownloadFailed(f"sha256 {got} is not the {self.target.sha256} its page names")
            os.fsync(fh.fileno())
            with self.cond:
                os.replace(part, self.target.final)  # published only now: a checked file
                self.part = None
                self.ok = True
        except Exception as exc:  # noqa: BLE001 (every follower is told; the message names no URL)
            with self.cond:
                self.error = str(exc) if isinstance(exc, DownloadFailed) else f"upstream: {type(exc).__name__}"
                if not keep_part and self.part is not None:
                    self.part.unlink(missing_ok=True)
                    self.part = None
        finally:
            if fh is not None:
                fh.close()  # releases the lock: a later run may resume what is left
            with self.cond:
                self.done = self.started = True
                self.cond.notify_all()

    # --- followers ------------------------------------------------------------------------------

    def failed(self) -> bool:
        """The fetch failed (it may still be finishing: its .part is already gone or released to a later run)."""
        with self.cond:
            return self.error is not None

    def wait_started(self, timeout: float = STALL_S) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.started, timeout)

    def open(self) -> Optional[BinaryIO]:
        """The bytes so far, to follow: the published file once it is, else the `.part`; None on failure."""
        with self.cond:
            if self.ok:
                return self.target.final.open("rb")
            if self.part is None or self.error:
                return None
            return self.part.open("rb")

    def readable(self, offset: int) -> tuple[int, bool]:
        """Wait until bytes past `offset` may be sent (or the end); -> (bytes that may be sent, finished).
        The last byte is held back until the hash matched: a follower never gets a complete bad file."""
        with self.cond:
            def ready() -> bool:
                return self.done or self._sendable() > offset

            if not self.cond.wait_for(ready, STALL_S):
                raise DownloadFailed("upstream stalled")
            if self.done and not self.ok:
                raise DownloadFailed(self.error or "the download failed")
            return (self.written, True) if self.done else (self._sendable(), False)

    def _sendable(self) -> int:
        return max(0, self.written - 1)


def _length(value: Optional[str]) -> Optional[int]:
    return int(value) if value and value.isdigit() else None


def _range_start(value: Optional[str]) -> Optional[int]:
    """The first byte of a `Content-Range: bytes A-B/N` answer."""
    if not value or not value.startswith("bytes "):
        return None
    start = value[6:].split("-", 1)[0]
    return int(start) if start.isdigit() else None
