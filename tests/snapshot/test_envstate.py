"""Reading an env's state from disk: library digests from the wheels' RECORD, re-hashing what changed."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from tfgpu_install.snapshot import envstate


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _env(tmp_path: Path, record_digest_of: bytes) -> tuple[Path, Path]:
    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    lib = sp / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"A" * 64)
    info = sp / "nvidia_cudnn_cu12-9.3.0.75.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(
        f"nvidia/cudnn/lib/libcudnn.so.9,sha256={_b64(record_digest_of)},64\n"
        "nvidia_cudnn_cu12-9.3.0.75.dist-info/RECORD,,\n"
    )
    return env, lib


def test_first_capture_takes_the_wheel_record_digest(tmp_path: Path) -> None:
    env, lib = _env(tmp_path, b"A" * 64)
    (files,) = envstate.library_files(env)
    assert files.path == "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
    assert files.sha256 == hashlib.sha256(b"A" * 64).hexdigest() and files.size == 64


def test_record_is_trusted_only_when_the_size_agrees(tmp_path: Path) -> None:
    env, lib = _env(tmp_path, b"A" * 64)
    lib.write_bytes(b"B" * 65)  # not what the wheel unpacked: hashed for real
    (files,) = envstate.library_files(env)
    assert files.sha256 == hashlib.sha256(b"B" * 65).hexdigest()


def test_a_changed_file_is_rehashed_against_the_previous_record(tmp_path: Path) -> None:
    env, lib = _env(tmp_path, b"A" * 64)
    (before,) = envstate.library_files(env)
    lib.write_bytes(b"C" * 64)  # same size, new content, new mtime
    os.utime(lib, ns=(before.mtime_ns + 10**9, before.mtime_ns + 10**9))
    (after,) = envstate.library_files(env, previous={before.path: before})
    assert after.sha256 == hashlib.sha256(b"C" * 64).hexdigest() != before.sha256
    # Unchanged size and mtime: the recorded digest stands, nothing is read.
    (again,) = envstate.library_files(env, previous={after.path: after})
    assert again == after
