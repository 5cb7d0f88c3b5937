"""installer.fetch.download against a real loopback HTTP server."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from installer.context import Context
from installer.fetch.download import cached_path, check_url, fetch, fetch_text, make_session, proxies_for
from installer.errors import DownloadError, ExitCode, UsageError
from tests.support.httpserver import Fault, LoopbackServer, refused_port, self_signed_cert

DATA = os.urandom(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def fast(ctx: Context) -> Context:
    ctx.extra["download_backoff"] = 0.0
    return ctx


def _leftovers(ctx: Context) -> list[str]:
    d = ctx.cache_dir / "downloads"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_happy_path_then_cache_hit_makes_no_request(fast: Context) -> None:
    seen: list[float] = []
    fast.progress = lambda what, done, total: seen.append(done)
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
    ctx.environ = {**ctx.environ, "REQUESTS_CA_BUNDLE": "/etc/site-ca.pem", **env}
    with make_session(ctx, "https://developer.download.nvidia.com/x") as session:
        assert session.verify == "/etc/site-ca.pem" and session.proxies["https"] == "http://proxy:3128"
        assert session.trust_env is False  # os.environ is not consulted behind the Context's back


# --- redirects (issue 17): https never falls back to plain http ------------------------------


@pytest.fixture
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the loopback certificate is made with openssl")
    return self_signed_cert(tmp_path_factory.getbasetemp() / "loopback-tls")


@pytest.fixture
def trusting(fast: Context, tls: tuple[Path, Path]) -> Context:
    """A Context that trusts the loopback certificate (as a site CA through SSL_CERT_FILE)."""
    fast.environ = {**fast.environ, "SSL_CERT_FILE": str(tls[0])}
    return fast


def test_https_download_and_https_redirect_work(trusting: Context, tls: tuple[Path, Path]) -> None:
    with LoopbackServer(tls=tls) as srv:
        srv.add("/new/f", DATA)
        url = srv.redirect("/old/f", srv.url("/new/f"))
        assert url.startswith("https://")
        got = fetch(trusting, url, SHA, size=len(DATA))
        assert got.path.read_bytes() == DATA
        assert [r.path for r in srv.requests] == ["/old/f", "/new/f"]
        srv.add("/new/m.json", b"{}")
        assert fetch_text(trusting, srv.redirect("/m.json", "/new/m.json")) == "{}"  # relative Location


@pytest.mark.parametrize("what", ["fetch", "fetch_text"])
def test_redirect_from_https_to_http_is_refused(trusting: Context, tls: tuple[Path, Path], what: str) -> None:
    """Two loopback servers: https (the mirror) answers 302 to plain http (the other).
    Refused before the http one is asked; nothing is kept."""
    with LoopbackServer(tls=tls) as mirror, LoopbackServer() as plain:
        plain.add("/f", DATA)
        url = mirror.redirect("/f", plain.url("/f"))
        with pytest.raises(DownloadError) as ei:
            if what == "fetch":
                fetch(trusting, url, SHA, size=len(DATA))
            else:
                fetch_text(trusting, url)
        assert plain.requests == []
        assert len(mirror.requests) == 1  # refused at once, not retried
    err = ei.value
    assert err.code == ExitCode.DOWNLOAD and err.ref == "insecure-redirect"
    assert err.message == f"refusing to follow a redirect from https to plain http: {url} -> {plain.url('/f')}"
    assert "--cudnn-mirror http://" in (err.hint or "")
    assert _leftovers(trusting) == []


def test_redirect_to_http_is_followed_for_a_mirror_the_user_named_http(
    trusting: Context, tls: tuple[Path, Path]
) -> None:
    with LoopbackServer(tls=tls) as mirror, LoopbackServer() as plain:
        plain.add("/f", DATA)
        got = fetch(trusting, mirror.redirect("/f", plain.url("/f")), SHA, size=len(DATA), allow_http=True)
        assert got.path.read_bytes() == DATA and len(plain.requests) == 1


def test_redirect_from_loopback_http_to_a_remote_http_host_is_refused(fast: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.redirect("/f", "http://mirror.example/f")
        with pytest.raises(DownloadError) as ei:
            fetch_text(fast, url)
    assert ei.value.ref == "insecure-redirect" and "plain http" in ei.value.message
