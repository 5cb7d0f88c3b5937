"""Downloads are capped at the manifest's size and have an overall deadline as well as the
idle (per-read) timeout: a drip server and an oversized stream on loopback fail cleanly."""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.support.httpserver import Fault, LoopbackServer
from tfgpu_install.context import Context
from tfgpu_install.errors import DownloadError, ExitCode
from tfgpu_install.fetch.download import fetch, fetch_text

DATA = os.urandom(100_000)
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def fast(ctx: Context) -> Context:
    ctx.hooks.download_backoff = 0.0
    return ctx


def _leftovers(ctx: Context) -> list[str]:
    d = ctx.cache_dir / "downloads"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


@pytest.mark.parametrize("fault", [Fault.ENDLESS, Fault.LYING])
def test_a_stream_longer_than_the_manifest_says_is_refused_and_not_kept(fast: Context, fault: Fault) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/cudnn.tar.xz", DATA, fault=fault)
        with pytest.raises(DownloadError) as info:
            fetch(fast, url, SHA, size=len(DATA))
    assert info.value.code == ExitCode.DOWNLOAD and info.value.ref == "download-oversized", info.value.message
    assert _leftovers(fast) == []


def test_a_drip_server_meets_the_overall_deadline(fast: Context) -> None:
    """One byte every 50 ms never trips the idle timeout; the deadline ends it, the part is kept."""
    with LoopbackServer() as srv:
        url = srv.add("/cudnn.tar.xz", DATA, fault=Fault.DRIP)
        with pytest.raises(DownloadError) as info:
            fetch(fast, url, SHA, size=len(DATA), timeout=5, deadline=0.5)
    assert info.value.ref == "download-too-slow", info.value.message
    assert _leftovers(fast) == [SHA + ".part"]  # resumable


def test_an_endless_text_document_is_refused(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/redistrib.json", b"{}", fault=Fault.ENDLESS)
        with pytest.raises(DownloadError) as info:
            fetch_text(fast, url)
    assert info.value.ref == "download-oversized"


def test_a_whole_file_still_downloads(fast: Context) -> None:
    with LoopbackServer() as srv:
        got = fetch(fast, srv.add("/ok", DATA), SHA, size=len(DATA), deadline=60)
    assert got.path.read_bytes() == DATA
