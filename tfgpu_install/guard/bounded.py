"""Bounded reads of user-supplied input: no file is read whole before its size is known to fit.

Every kind of input has a cap (docs/concepts/trust-rules.md, "Input limits"); a larger input, an
endless one (/dev/zero, a pipe that never ends) or a huge sparse file is BAD_INPUT (exit 5)
after reading at most cap + 1 bytes, never an out-of-memory kill.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import BinaryIO, Optional

from tfgpu_install.errors import BadInputError

MiB = 1024 * 1024
LIMITS = {
    "snapshot": 64 * MiB,  # snapshot/reader.py MAX_BYTES: a TF env's snapshot is a few hundred KB
    "bundle manifest": 16 * MiB,
    "profile": 8 * MiB,  # a profile or knowledge YAML file (the built-in ones are < 1 MiB together)
    "nvidia-smi output": 4 * MiB,  # 8 GPUs of `nvidia-smi -q` are ~100 KB
    "log": 64 * MiB,  # doctor --log: a job's log; pass the tail of a bigger one
    "lock file": 64 * MiB,  # a pylock.toml written by uv/pip
}


def _too_big(what: str, name: str, size: Optional[int], limit: int) -> BadInputError:
    got = f"{size} bytes" if size is not None else "more bytes"
    hint = ("pass the last part of it, e.g. `tail -c 10000000 FILE | tfgpu-install doctor --log -`"
            if what == "log" else f"pass a real {what} file (an endless stream or a device is not one)")
    return BadInputError(f"the {what} {name} is too large: {got} ({limit} bytes at most)", hint, ref="input-too-large")


def read_stream(fh: BinaryIO, what: str, name: str, limit: Optional[int] = None) -> bytes:
    cap = LIMITS[what] if limit is None else limit
    data = fh.read(cap + 1)
    if len(data) > cap:
        raise _too_big(what, name, None, cap)
    return data


def read_bytes(path: str, what: str, limit: Optional[int] = None) -> bytes:
    """The bytes of `path` ('-': stdin) if it holds at most the cap for `what`; BAD_INPUT if more.
    OSError (missing, unreadable) is left to the caller, which knows the fix to suggest."""
    cap = LIMITS[what] if limit is None else limit
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stdin (a test's StringIO)
            return read_stream_text(sys.stdin, what, cap).encode()
        return read_stream(stream, what, "on stdin", cap)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", path)
        if stat.S_ISREG(st.st_mode) and st.st_size > cap:
            raise _too_big(what, path, st.st_size, cap)  # known from the size: not one byte read
        return read_stream(fh, what, path, cap)


def read_stream_text(fh: object, what: str, limit: int) -> str:
    data: str = fh.read(limit + 1)  # type: ignore[attr-defined]
    if len(data) > limit:
        raise _too_big(what, "on stdin", None, limit)
    return data


def read_text(path: str, what: str, limit: Optional[int] = None, errors: str = "strict") -> str:
    return read_bytes(path, what, limit).decode("utf-8", errors=errors)
