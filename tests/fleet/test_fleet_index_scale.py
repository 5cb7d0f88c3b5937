"""The fleet's index at fleet scale and under attack (#42, #39): many connections at once, keep-alive,
Range, a cold file streamed to its first clients while it is fetched, a download that outlives its run
resumed by the next, one `.part` per run, no credentials in error bodies, this run's token required.
Real HTTP on loopback: a controllable upstream (it can pause mid-file) and urllib/http.client clients."""

from __future__ import annotations

import hashlib
import http.client
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import urljoin, urlsplit

import pytest

from tests.fleet.index_client import auth_header, plain, urlopen
from tfgpu_install.fleet.download import claim_part
from tfgpu_install.fleet.mirror import FleetMirror

NAME = "blob-1.0-py3-none-any.whl"
SIZE = 3 << 20


class Upstream:
    """/simple/blob/ names one file with its sha256; the file is sent in two halves, the second only once
    `release` is set (a slow or stalled upstream on demand). Answers Range; records each request."""

    def __init__(self, data: bytes, sha: Optional[str] = None, auth: Optional[str] = None) -> None:
        self.data, self.sha = data, sha or hashlib.sha256(data).hexdigest()
        self.release = threading.Event()
        self.release.set()
        self.requests: list[tuple[str, Optional[str]]] = []
        self.half_sent = threading.Event()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                return None

            def do_GET(self) -> None:
                outer.requests.append((self.path, self.headers.get("Range")))
                if self.path.rstrip("/").endswith("/simple/blob"):
                    body = f'<a href="../../files/{NAME}#sha256={outer.sha}">{NAME}</a>'.encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if not self.path.endswith(NAME):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(outer.data) - 1}/{len(outer.data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(outer.data) - start))
                self.end_headers()
                body = outer.data[start:]
                half = len(body) // 2
                try:
                    self.wfile.write(body[:half])
                    self.wfile.flush()
                    outer.half_sent.set()
                    if not outer.release.wait(60):
                        return  # stalled for good: the connection closes short
                    self.wfile.write(body[half:])
                except OSError:
                    return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        netloc = f"{auth}@" if auth else ""
        self.url = f"http://{netloc}127.0.0.1:{self.server.server_address[1]}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def data() -> bytes:
    return hashlib.sha256(b"seed").digest() * (SIZE // 32)


@pytest.fixture()
def upstream(data: bytes) -> Iterator[Upstream]:
    up = Upstream(data)
    yield up
    up.stop()


def _start(up: Upstream, cache: Path, **kw: Any) -> tuple[FleetMirror, str, str]:
    m = FleetMirror(up.url, cache, "127.0.0.1", **kw)
    url = m.start()
    page = urlopen(url + "blob/", timeout=30).read().decode()
    href = page.split('href="', 1)[1].split('"', 1)[0].split("#", 1)[0]
    return m, url, urljoin(url, href)


def test_a_cold_file_reaches_the_first_client_while_it_is_still_being_fetched(upstream: Upstream,
                                                                               tmp_path: Path, data: bytes) -> None:
    """The upstream sends half, then waits until the client has its first bytes: store-then-forward
    (the old mirror) never sends a byte before the whole file is in, so this read times out there."""
    upstream.release.clear()
    m, _, file_url = _start(upstream, tmp_path / "cache")
    try:
        with urlopen(file_url, timeout=30) as r:
            first = r.read(4096)
            assert first == data[:4096]
            upstream.release.set()  # only now may the upstream finish
            rest = r.read()
        assert first + rest == data
        assert (tmp_path / "cache" / file_url.split("/")[-2]).read_bytes() == data  # published, checked
    finally:
        m.stop()


def test_many_clients_at_once_follow_one_fetch(upstream: Upstream, tmp_path: Path, data: bytes) -> None:
    upstream.release.clear()
    m, _, file_url = _start(upstream, tmp_path / "cache")
    got: list[bytes] = []

    def client() -> None:
        with urlopen(file_url, timeout=60) as r:
            got.append(r.read())

    try:
        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        assert upstream.half_sent.wait(30)
        upstream.release.set()
        for t in threads:
            t.join(60)
        assert got == [data] * 8
        assert [p for p, _ in upstream.requests if p.endswith(NAME)] == [f"/files/{NAME}"]  # fetched once
    finally:
        m.stop()


def test_two_hundred_connections_at_once_all_answered(upstream: Upstream, tmp_path: Path) -> None:
    """#42: with Python's default listen backlog of 5, 200 simultaneous connects lost half of them."""
    m, url, _ = _start(upstream, tmp_path / "cache", forks=200)
    host, port = urlsplit(url).hostname, urlsplit(url).port
    socks = []
    try:
        for _ in range(200):  # all connected before the server accepts any more: the backlog holds them
            s = socket.create_connection((host, port), timeout=30)
            socks.append(s)
        path = urlsplit(url).path + "blob/"
        for s in socks:
            auth = auth_header(url)["Authorization"]
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
                      .encode())
        answers = [s.makefile("rb").readline() for s in socks]
        assert answers == [b"HTTP/1.1 200 OK\r\n"] * 200
        assert m.backlog >= 200
    finally:
        for s in socks:
            s.close()
        m.stop()


def test_keep_alive_and_range_on_one_connection(upstream: Upstream, tmp_path: Path, data: bytes) -> None:
    m, url, file_url = _start(upstream, tmp_path / "cache")
    try:
        assert urlopen(file_url, timeout=30).read() == data  # cached now
        parts = urlsplit(file_url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        auth = auth_header(url)
        conn.request("GET", urlsplit(url).path + "blob/", headers=auth)
        first = conn.getresponse()
        first.read()
        sock = conn.sock
        conn.request("HEAD", parts.path, headers=auth)  # uv asks HEAD first, then GETs on the same connection
        head = conn.getresponse()
        assert (head.status, head.read(), head.headers["Accept-Ranges"]) == (200, b"", "bytes")
        conn.request("GET", parts.path, headers={**auth, "Range": "bytes=-100"})  # the last 100 bytes (uv)
        r = conn.getresponse()
        assert (r.status, r.read()) == (206, data[-100:])
        conn.request("GET", parts.path, headers={**auth, "Range": "bytes=1000-"})
        r = conn.getresponse()
        assert (r.status, r.headers["Content-Range"]) == (206, f"bytes 1000-{len(data) - 1}/{len(data)}")
        assert r.read() == data[1000:]
        conn.request("GET", parts.path, headers={**auth, "Range": "bytes=10-19"})
        r = conn.getresponse()
        assert (r.status, r.read()) == (206, data[10:20])
        assert conn.sock is sock  # the same connection all along
        conn.request("GET", parts.path, headers={**auth, "Range": f"bytes={len(data) + 5}-"})
        r = conn.getresponse()
        assert r.status == 416
        r.read()
        conn.close()
    finally:
        m.stop()


_RUN = """
import sys, time
from pathlib import Path
from tfgpu_install.fleet.mirror import FleetMirror
m = FleetMirror(sys.argv[1], Path(sys.argv[2]), "127.0.0.1")
print(m.start(), flush=True)
time.sleep(600)
"""


def test_a_download_cut_off_by_the_end_of_a_run_is_resumed_by_the_next(upstream: Upstream, tmp_path: Path,
                                                                       data: bytes) -> None:
    """A run (its own process) is killed mid-file; the next run resumes the .part with Range and publishes
    the whole file once its hash matches."""
    import subprocess
    import sys

    upstream.release.clear()
    cache = tmp_path / "cache"
    run = subprocess.Popen([sys.executable, "-c", _RUN, upstream.url, str(cache)], stdout=subprocess.PIPE, text=True,
                           cwd=str(Path(__file__).resolve().parents[2]))
    try:
        assert run.stdout is not None
        url = run.stdout.readline().strip()
        page = urlopen(url + "blob/", timeout=30).read().decode()
        file_url = urljoin(url, page.split('href="', 1)[1].split('"', 1)[0].split("#", 1)[0])
        token = file_url.split("/")[-2]
        r = urlopen(file_url, timeout=30)
        r.read(4096)
        assert upstream.half_sent.wait(30)
        for _ in range(100):  # the first half is in the .part
            parts = list(cache.glob(token + ".*.part"))
            if parts and parts[0].stat().st_size >= len(data) // 2:
                break
            threading.Event().wait(0.1)
    finally:
        run.kill()  # the run ends mid-file
        run.wait(30)
    r.close()
    assert parts and not (cache / token).exists()
    upstream.requests.clear()
    upstream.release.set()
    m2, _, file_url2 = _start(upstream, cache)
    try:
        with urlopen(file_url2, timeout=60) as r2:
            assert r2.read() == data
        ranges = [rng for p, rng in upstream.requests if p.endswith(NAME)]
        assert len(ranges) == 1 and ranges[0] is not None  # only what the .part lacked was fetched
        assert 0 < int(ranges[0][6:-1]) <= len(data) // 2
        assert (cache / token).read_bytes() == data and not list(cache.glob("*.part"))
    finally:
        m2.stop()


def test_two_runs_never_share_a_part(tmp_path: Path) -> None:
    """#39: two runs wrote one `.part`; a part another run holds is never taken."""
    final = tmp_path / "cache" / "tok"
    a, pa = claim_part(final)
    b, pb = claim_part(final)
    assert pa != pb
    a.write(b"left over")
    a.close()  # that run ended: its part is free to resume
    c, pc = claim_part(final)
    assert pc == pa and c.tell() == len(b"left over")
    b.close()
    c.close()


def test_a_bad_file_resumed_from_a_left_over_part_is_not_published(upstream: Upstream, tmp_path: Path,
                                                                   data: bytes) -> None:
    """A left-over .part with other bytes: the whole file's hash is checked, so nothing bad is kept."""
    cache = tmp_path / "cache"
    m, _, file_url = _start(upstream, cache)
    token = file_url.split("/")[-2]
    (cache).mkdir(exist_ok=True)
    (cache / f"{token}.planted0000.part").write_bytes(b"X" * 1000)
    try:
        r = urlopen(file_url, timeout=30)
        try:
            body = r.read()
            complete = True
        except http.client.IncompleteRead:
            complete = False
        assert not complete or body != data or False
        assert not (cache / token).exists()
        assert urlopen(file_url, timeout=30).read() == data  # then fetched whole: good
        assert (cache / token).read_bytes() == data
    finally:
        m.stop()


def test_error_bodies_carry_no_credentials(tmp_path: Path, data: bytes) -> None:
    """#39: the mirror's 502 told every client USER:TOKEN@upstream."""
    up = Upstream(data, auth="alice:s3cr3t-t0ken")
    up.stop()  # upstream down: every page is a 502
    m = FleetMirror(up.url, tmp_path / "cache", "127.0.0.1")
    url = m.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urlopen(url + "blob/", timeout=30)
        body = err.value.read()
        assert err.value.code == 502 and b"s3cr3t" not in body and b"alice" not in body
        assert "s3cr3t" not in m.shown_upstream and m.shown_upstream.startswith("http://***@127.0.0.1:")
    finally:
        m.stop()


def test_only_this_runs_token_opens_the_index(upstream: Upstream, tmp_path: Path) -> None:
    """#39: the index took any request. Now its URL carries this run's token as credentials (pip and uv send
    them as Basic auth and keep them out of their cache keys): without them, 401 and nothing else said."""
    m, url, file_url = _start(upstream, tmp_path / "cache")
    try:
        parts = urlsplit(url)
        assert parts.username == "tfgpu" and parts.password == m.token and len(m.token) >= 20
        wrong = url.replace(m.token, "x" * len(m.token))
        for bad in (plain(url) + "blob/", wrong + "blob/", plain(file_url), file_url.replace(m.token, m.token[:-1])):
            with pytest.raises(urllib.error.HTTPError) as err:
                urlopen(bad)
            assert err.value.code == 401 and err.value.read() == b"", bad
        assert urlopen(url + "blob/").status == 200  # the control
        other = FleetMirror(upstream.url, tmp_path / "cache2", "127.0.0.1")
        assert other.token != m.token  # a token per run
    finally:
        m.stop()
