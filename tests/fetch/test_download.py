"""tfgpu_install.fetch.download against a real loopback HTTP server."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import pytest

from tests.support.httpserver import Fault, LoopbackServer, refused_port
from tfgpu_install.context import Context
from tfgpu_install.errors import DownloadError, ExitCode, UsageError
from tfgpu_install.fetch.download import cached_path, check_url, fetch, fetch_text, make_session, proxies_for

DATA = os.urandom(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def fast(ctx: Context) -> Context:
    ctx.hooks.download_backoff = 0.0
    return ctx


def _leftovers(ctx: Context) -> list[str]:
    d = ctx.cache_dir / "downloads"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_happy_path_then_cache_hit_makes_no_request(fast: Context) -> None:
    seen: list[float] = []
    fast = replace(fast, progress=lambda what, done, total: seen.append(done))
    with LoopbackServer() as srv:
        url = srv.add("/f.tar.xz", DATA)
        got = fetch(fast, url, SHA, size=len(DATA))
        assert got.path == cached_path(fast, SHA)
        assert got.path.read_bytes() == DATA
        assert not got.cached and not got.resumed
        assert seen[-1] == len(DATA)
        again = fetch(fast, url, SHA, size=len(DATA))
        assert again.cached and again.path == got.path
        assert len(srv.requests_for("/f.tar.xz")) == 1  # the second fetch never asked
    assert _leftovers(fast) == [SHA]


def test_damaged_cache_entry_is_fetched_again(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/f", DATA)
        p = cached_path(fast, SHA)
        p.parent.mkdir(parents=True)
        p.write_bytes(b"rot")
        got = fetch(fast, url, SHA)
        assert not got.cached and got.path.read_bytes() == DATA
        assert len(srv.requests) == 1


def test_cut_connection_is_resumed_with_range(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/f", DATA, fault=Fault.CUT_ONCE, cut_at=100_000)
        got = fetch(fast, url, SHA, size=len(DATA))
        assert got.resumed
        assert got.path.read_bytes() == DATA
        reqs = srv.requests_for("/f")
        assert reqs[0].range is None
        # Resumed from what reached the disk (urllib3 may drop a partly read last chunk).
        rng = reqs[-1].range or ""
        assert rng.startswith("bytes=") and 0 < int(rng[6:-1]) <= 100_000
    assert _leftovers(fast) == [SHA]


def test_part_from_an_earlier_run_is_resumed(fast: Context) -> None:
    part = cached_path(fast, SHA).with_name(SHA + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(DATA[:1234])
    with LoopbackServer() as srv:
        got = fetch(fast, srv.add("/f", DATA), SHA, size=len(DATA))
        assert got.resumed and got.path.read_bytes() == DATA
        assert [r.range for r in srv.requests] == ["bytes=1234-"]


def test_wrong_sha256_keeps_nothing(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/f", DATA, fault=Fault.WRONG_BYTES)
        with pytest.raises(DownloadError) as ei:
            fetch(fast, url, SHA, size=len(DATA))
    err = ei.value
    assert err.ref == "download-checksum" and err.code == ExitCode.DOWNLOAD
    assert SHA in err.message and err.hint
    assert _leftovers(fast) == []


def test_truncated_download_keeps_only_a_resumable_part(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/f", DATA, fault=Fault.SHORT, cut_at=5000)
        with pytest.raises(DownloadError) as ei:
            fetch(fast, url, SHA, size=len(DATA))
    assert ei.value.ref == "download-truncated"
    assert "5000 of 300000" in ei.value.message
    assert _leftovers(fast) == [SHA + ".part"]
    assert not cached_path(fast, SHA).exists()


def test_server_closing_mid_stream_every_time(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.add("/f", DATA, fault=Fault.CLOSE_MID, cut_at=50_000)
        with pytest.raises(DownloadError) as ei:
            fetch(fast, url, SHA, size=len(DATA), attempts=3)
        assert len(srv.requests_for("/f")) == 3
    assert ei.value.ref == "download-interrupted"
    assert "resume" in (ei.value.hint or "")
    assert _leftovers(fast) == [SHA + ".part"]  # the head is kept for the next run


def test_404_is_one_clear_message(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.url("/missing.tar.xz")
        with pytest.raises(DownloadError) as ei:
            fetch(fast, url, SHA)
    assert ei.value.ref == "download-not-found" and "404" in ei.value.message
    assert _leftovers(fast) == []


def test_connection_refused(fast: Context) -> None:
    url = f"http://127.0.0.1:{refused_port()}/f"
    with pytest.raises(DownloadError) as ei:
        fetch(fast, url, SHA)
    assert ei.value.ref == "download-connect"
    assert "refused" in ei.value.message
    with pytest.raises(DownloadError):
        fetch_text(fast, url)
    assert _leftovers(fast) == []


def test_fetch_text(fast: Context) -> None:
    with LoopbackServer() as srv:
        assert fetch_text(fast, srv.add("/m.json", b'{"a": 1}')) == '{"a": 1}'
        with pytest.raises(DownloadError):
            fetch_text(fast, srv.url("/nope.json"))


def test_https_required_for_remote_hosts() -> None:
    check_url("https://developer.download.nvidia.com/compute/cudnn/redist/")
    check_url("http://127.0.0.1:8080/x")  # loopback
    check_url("http://mirror.internal/x", allow_http=True)  # the user named it
    with pytest.raises(UsageError) as ei:
        check_url("http://mirror.internal/x")
    assert ei.value.ref == "insecure-url"
    with pytest.raises(UsageError):
        check_url("ftp://example.com/x")


def test_insecure_url_is_refused_before_any_write(fast: Context) -> None:
    with pytest.raises(UsageError):
        fetch(fast, "http://example.com/f", SHA)
    assert _leftovers(fast) == []


def test_a_complete_part_left_by_a_kill_is_just_renamed(fast: Context) -> None:
    part = cached_path(fast, SHA).with_name(SHA + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(DATA)
    with LoopbackServer() as srv:
        got = fetch(fast, srv.add("/f", DATA), SHA, size=len(DATA))
        assert srv.requests == []
    assert got.path.read_bytes() == DATA and _leftovers(fast) == [SHA]


def test_proxy_and_ca_settings_come_from_the_context(ctx: Context) -> None:
    env = {"HTTPS_PROXY": "http://proxy:3128", "http_proxy": "http://proxy:3128", "NO_PROXY": "mirror.internal"}
    assert proxies_for(env, "https://developer.download.nvidia.com/x") == {
        "https": "http://proxy:3128", "http": "http://proxy:3128"}
    assert proxies_for(env, "https://mirror.internal/x") == {}
    assert proxies_for(env, "http://127.0.0.1:8000/x") == {}  # loopback never goes through a proxy
    ctx = replace(ctx, environ={**ctx.environ, "REQUESTS_CA_BUNDLE": "/etc/site-ca.pem", **env})
    with make_session(ctx, "https://developer.download.nvidia.com/x") as session:
        # The named CA now adds to the system store instead of replacing it (issue #43: one trust for every
        # client; tests/fetch/test_tls_trust.py verifies real TLS servers through it); the proxies as before.
        assert session.verify is True and session.proxies["https"] == "http://proxy:3128"
        assert type(session.get_adapter("https://x")).__name__ == "TrustAdapter"
        assert session.trust_env is False  # os.environ is not consulted behind the Context's back
