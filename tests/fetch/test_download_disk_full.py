"""A download into a really full cache dir (a filled tmpfs): exit 6 with the path and how much is
still needed; once space is freed the same fetch resumes from the bytes already on disk."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.support.full_disk import fill, tmpfs
from tests.support.httpserver import LoopbackServer
from tfgpu_install.context import build_context
from tfgpu_install.errors import DiskFull, ExitCode
from tfgpu_install.fetch.download import fetch

DATA = os.urandom(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


def test_a_full_cache_is_exit_6_with_what_is_needed_and_resumes(tmp_env: dict[str, str], tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "1m") as fs, LoopbackServer() as srv:
        ctx = build_context(dict(tmp_env, TFGPU_CACHE_DIR=str(fs / "cache")))
        ctx.hooks.download_backoff = 0.0
        (fs / "cache" / "downloads").mkdir(parents=True)
        filler = fill(fs, leave=100_000)
        url = srv.add("/f.tar.xz", DATA)
        with pytest.raises(DiskFull) as info:
            fetch(ctx, url, SHA, size=len(DATA))
        err = info.value
        part = fs / "cache" / "downloads" / f"{SHA}.part"
        assert err.code == ExitCode.ENVIRONMENT and err.message.startswith(f"no space left on {part}; "), err.message
        assert "KiB needed" in err.message and "rest of f.tar.xz" in err.message
        have = part.stat().st_size
        assert 0 < have < len(DATA)
        filler.unlink()
        got = fetch(ctx, url, SHA, size=len(DATA))
        assert got.resumed and got.path.read_bytes() == DATA
        assert srv.requests_for("/f.tar.xz")[-1].range == f"bytes={have}-"
