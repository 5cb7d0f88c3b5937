"""A real full filesystem for tests: a small tmpfs mounted on a temp dir, filled to the last byte.

Needs root (mount); the tests skip with the reason when mounting is refused.
"""

from __future__ import annotations

import errno
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def tmpfs(mount_point: Path, size: str = "2m") -> Iterator[Path]:
    mount_point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root): {done.stderr.strip() or done.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(mount_point: Path, leave: int = 0) -> Path:
    """Write a filler file until the filesystem refuses (ENOSPC), then give back `leave` bytes.
    Deleting the returned file frees the space again."""
    filler = mount_point / "filler"
    block = b"\0" * 65536
    with open(filler, "wb", buffering=0) as fh:
        while True:
            try:
                fh.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        for size in (4096, 512, 1):  # the last partial pages
            while True:
                try:
                    fh.write(b"\0" * size)
                except OSError:
                    break
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler
