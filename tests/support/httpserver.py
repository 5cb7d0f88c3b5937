"""A real loopback HTTP server in a thread: Range requests and fault modes.

    with LoopbackServer() as srv:
        srv.add("/a.tar.xz", data)                       # plain
        srv.add("/b", data, fault=Fault.CUT_ONCE, cut_at=100)  # dies after 100 bytes, once
        url = srv.url("/a.tar.xz")
        srv.requests  -> [Request(path, range_header), ...]

    with LoopbackServer(tls=self_signed_cert(tmp)) as srv:   # https://127.0.0.1:PORT/
        srv.redirect("/old", other.url("/new"))              # 302 to anywhere
"""

from __future__ import annotations

import enum
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional


class Fault(enum.Enum):
    NONE = "none"
    CUT_ONCE = "cut-once"  # first response dies after cut_at bytes, later ones are whole
    CLOSE_MID = "close-mid"  # every response dies after cut_at bytes
    NOT_FOUND = "404"
    WRONG_BYTES = "wrong-bytes"  # same length, different content
    SHORT = "short"  # a clean, complete response holding only the first cut_at bytes
    DRIP = "drip"  # one byte every DRIP_EVERY seconds: never idle long enough for a read timeout
    ENDLESS = "endless"  # the data, then more and more bytes, no Content-Length (a stream that never ends)
    LYING = "lying"  # a Content-Length far above the data's size, then the data and more


DRIP_EVERY = 0.05
ENDLESS_LIMIT = 256 * 1024 * 1024  # the server gives up after this much (a client that never stops)


@dataclass
class Resource:
    data: bytes
    fault: Fault = Fault.NONE
    cut_at: int = 0
    served: int = 0  # responses started
    location: Optional[str] = None  # a redirect: answered with 302 and this Location
    content_type: Optional[str] = None  # sent when set (a PEP 503 page for uv: "text/html")


@dataclass(frozen=True)
class Request:
    path: str
    range: Optional[str]


@dataclass
class LoopbackServer:
    resources: dict[str, Resource] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    tls: Optional[tuple[Path, Path]] = None  # (certificate, key): serve https

    def add(self, path: str, data: bytes, fault: Fault = Fault.NONE, cut_at: int = 0,
            content_type: Optional[str] = None) -> str:
        self.resources[path] = Resource(data, fault, cut_at, content_type=content_type)
        return self.url(path)

    def redirect(self, path: str, location: str) -> str:
        self.resources[path] = Resource(b"", location=location)
        return self.url(path)

    def url(self, path: str = "/") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    def requests_for(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.path == path]

    def __enter__(self) -> "LoopbackServer":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                rng = self.headers.get("Range")
                owner.requests.append(Request(path, rng))
                res = owner.resources.get(path)
                if res is None or res.fault is Fault.NOT_FOUND:
                    self._send(404, b"not found\n")
                    return
                res.served += 1
                if res.location is not None:
                    self.send_response(302)
                    self.send_header("Location", res.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = res.data
                if res.fault is Fault.WRONG_BYTES:
                    data = bytes((b ^ 0x5A) for b in data)
                if res.fault is Fault.SHORT:
                    data = data[: res.cut_at]
                start, last, ranged = 0, len(data) - 1, False
                if rng and rng.startswith("bytes=") and "-" in rng:
                    first, _, end = rng[len("bytes="):].partition("-")  # "N-" and "N-M" (closed)
                    start, ranged = int(first), bool(end)
                    last = min(int(end), len(data) - 1) if end else last
                    if start >= len(data):
                        self._send(416, b"")
                        return
                body = data[start : last + 1]
                if res.fault in (Fault.DRIP, Fault.ENDLESS, Fault.LYING):
                    _stream(self, res.fault, body)
                    return
                self.send_response(206 if start or ranged else 200)
                if start or ranged:
                    self.send_header("Content-Range", f"bytes {start}-{last}/{len(data)}")
                if res.content_type:
                    self.send_header("Content-Type", res.content_type)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = res.fault is Fault.CLOSE_MID or (res.fault is Fault.CUT_ONCE and res.served == 1)
                if cut and res.cut_at - start < len(body):
                    self.wfile.write(body[: max(res.cut_at - start, 0)])
                    self.wfile.flush()
                    # Die mid-body: the client sees fewer bytes than Content-Length promised.
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if self.tls:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _stream(handler: BaseHTTPRequestHandler, fault: Fault, body: bytes) -> None:
    """DRIP, ENDLESS and LYING answers (a full 200, whatever Range asked)."""
    import time

    handler.send_response(200)
    if fault is Fault.DRIP:
        handler.send_header("Content-Length", str(len(body)))
    elif fault is Fault.LYING:
        handler.send_header("Content-Length", str(len(body) * 1000))
    handler.end_headers()
    try:
        if fault is Fault.DRIP:
            for i in range(len(body)):
                handler.wfile.write(body[i:i + 1])
                handler.wfile.flush()
                time.sleep(DRIP_EVERY)
            return
        handler.wfile.write(body)
        sent = len(body)
        while sent < ENDLESS_LIMIT:
            handler.wfile.write(b"\0" * 65536)
            sent += 65536
    except OSError:
        pass  # the client hung up: what a client should do
    handler.close_connection = True


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def self_signed_cert(workdir: Path) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1 made by the real openssl; the certificate is its own
    CA, so a client given it as SSL_CERT_FILE verifies the loopback server for real."""
    workdir.mkdir(parents=True, exist_ok=True)
    cert, key = workdir / "loopback-cert.pem", workdir / "loopback-key.pem"
    if not cert.exists():
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
             "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            check=True, capture_output=True,
        )
    return cert, key
