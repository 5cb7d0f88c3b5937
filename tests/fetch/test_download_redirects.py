"""tfgpu_install.fetch.download's redirects (issue 17): https never falls back to plain http.
Two real loopback servers, the mirror on https with an openssl-made certificate that the
Context trusts as a site CA (SSL_CERT_FILE), the other on plain http."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.httpserver import LoopbackServer, self_signed_cert
from tests.support.promised import require_tool
from tfgpu_install.context import Context
from tfgpu_install.errors import DownloadError, ExitCode
from tfgpu_install.fetch.download import downloads_dir, fetch, fetch_text

DATA = os.urandom(100_000)
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    require_tool("openssl", "the loopback certificate is made with it")
    return self_signed_cert(tmp_path_factory.getbasetemp() / "loopback-tls")


@pytest.fixture
def trusting(ctx: Context, tls: tuple[Path, Path]) -> Context:
    """A Context that trusts the loopback certificate (as a site CA through SSL_CERT_FILE).
    No retry pause to cut: a refused redirect is never retried."""
    return replace(ctx, environ={**ctx.environ, "SSL_CERT_FILE": str(tls[0])})


def _leftovers(ctx: Context) -> list[str]:
    d = downloads_dir(ctx)
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


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


def test_redirect_from_loopback_http_to_a_remote_http_host_is_refused(ctx: Context) -> None:
    with LoopbackServer() as srv:
        url = srv.redirect("/f", "http://mirror.example/f")
        with pytest.raises(DownloadError) as ei:
            fetch_text(ctx, url)
    assert ei.value.ref == "insecure-redirect" and "plain http" in ei.value.message
