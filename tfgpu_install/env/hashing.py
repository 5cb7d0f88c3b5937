"""sha256 of many files at disk speed, for the file check (env/integrity.py).

Threads sized to the CPUs this process may run on: reading a file and hashlib's update both
release the GIL, so N threads hash about N files at once, like `xargs -P N sha256sum`. The
largest files go first, so the last thread is not left alone with a 500 MB library at the end.
Progress (files and bytes done) is reported from the calling thread, at most ten times a second.
"""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Optional, Sequence, Union

# (files done, bytes done, files in all, bytes in all)
HashProgress = Callable[[int, int, int, int], None]

_CHUNK = 1 << 20
_SERIAL_BELOW = 4 << 20  # fewer bytes than this in all: one thread (starting threads costs more)


def workers() -> int:
    """Threads for hashing: the CPUs this process may run on (sched_getaffinity: a container's
    or taskset's limit), at least 1, at most 32."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 32))


def sha256_path(path: str) -> str:
    """The file's sha256 (hex), read in 1 MiB pieces into one buffer."""
    h = hashlib.sha256()
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    return h.hexdigest()


def hash_files(jobs: Sequence[tuple[str, int]], threads: Optional[int] = None,
               progress: Optional[HashProgress] = None) -> list[Union[str, OSError]]:
    """jobs: (path, size in bytes as stat() said). Returns, in the jobs' order, each file's sha256
    (hex) or the OSError that stopped reading it."""
    total = sum(size for _, size in jobs)
    n = threads or workers()
    out: list[Union[str, OSError]] = [OSError("not hashed")] * len(jobs)
    tick = _Ticker(progress, len(jobs), total)
    if n <= 1 or len(jobs) <= 1 or total < _SERIAL_BELOW:
        for i, (path, size) in enumerate(jobs):
            out[i] = _one(path)
            tick.done(size)
        tick.finish()
        return out
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i][1])
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="tfgpu-hash") as pool:
        pending: dict[Future[Union[str, OSError]], int] = {pool.submit(_one, jobs[i][0]): i for i in order}
        while pending:
            finished, _ = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for fut in finished:
                i = pending.pop(fut)
                out[i] = fut.result()
                tick.done(jobs[i][1])
    tick.finish()
    return out


def _one(path: str) -> Union[str, OSError]:
    try:
        return sha256_path(path)
    except OSError as exc:
        return exc


class _Ticker:
    """Counts what is done and calls progress at most every 0.1 s (and once at the end)."""

    def __init__(self, progress: Optional[HashProgress], files: int, size: int) -> None:
        self.progress = progress
        self.files, self.size = files, size
        self.n = self.bytes = 0
        self.last = 0.0

    def done(self, size: int) -> None:
        self.n += 1
        self.bytes += size
        if self.progress is not None:
            now = time.monotonic()
            if now - self.last >= 0.1:
                self.last = now
                self.progress(self.n, self.bytes, self.files, self.size)

    def finish(self) -> None:
        if self.progress is not None and self.files:
            self.progress(self.n, self.bytes, self.files, self.size)


__all__ = ["HashProgress", "hash_files", "sha256_path", "workers"]
