"""One lock per target environment, so two runs never interleave their steps.

fcntl.flock on <state>/envs/<key>/lock: the kernel drops it when the holder dies (even
by kill -9), so a stale lock file never blocks anyone. The holder writes its PID into
the file so the one refused can say who holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Optional

from tfgpu_install.errors import LockedError, disk_full, is_disk_full


class EnvLock:
    def __init__(self, path: Path, env: Path, wait: bool = False) -> None:
        self.path = Path(path)
        self.env = env
        self.wait = wait
        self._fd: Optional[int] = None

    def holder(self) -> Optional[int]:
        try:
            text = self.path.read_text().strip()
        except (OSError, ValueError):  # ValueError: not text (a damaged file only loses the PID)
            return None
        return int(text) if text.isdigit() else None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if is_disk_full(exc):
                raise disk_full(self.path, exc, doing="creating the lock file") from exc
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            pid = self.holder()
            who = f"PID {pid}" if pid else "another process"
            raise LockedError(
                f"{self.env} is being changed by another tfgpu-install ({who})",
                hint="wait for it to finish, or pass --wait to queue behind it",
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            os.fsync(fd)
        except OSError as exc:
            # Nothing was changed yet: give the lock back and stop before any step runs.
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            if is_disk_full(exc):
                raise disk_full(self.path, exc, doing="writing the lock holder's PID") from exc
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "EnvLock":
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()
