"""A TLS-inspecting proxy on loopback, as a company network has: clients send CONNECT host:443 through
HTTPS_PROXY, and the proxy answers the TLS handshake itself with a certificate for that host signed by its
own CA, then relays the plain requests to the origin (a LoopbackServer). The CA is put only in a
system-style store: a hashed certificate directory (what /etc/ssl/certs is; OpenSSL reads it through
SSL_CERT_DIR), never in a bundle file a client is told about.

    ca = make_ca(tmp)                       # CA key/cert, leaf for the names, hashed store dir
    with InspectingProxy(ca, origin_port) as proxy:
        env["HTTPS_PROXY"] = proxy.url; env["SSL_CERT_DIR"] = str(ca.store)
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional


@dataclass(frozen=True)
class Ca:
    cert: Path
    leaf_cert: Path
    leaf_key: Path
    store: Path  # a hashed directory holding only the CA: <subject hash>.0


def _openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], check=True, capture_output=True, text=True).stdout


def make_ca(workdir: Path, names: tuple[str, ...] = ("pypi.test",)) -> Ca:
    workdir.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = workdir / "ca.key", workdir / "ca.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_cert),
             "-days", "2", "-subj", "/CN=Loopback Inspecting Proxy CA", "-addext", "basicConstraints=critical,CA:true",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    key, csr, cert = workdir / "leaf.key", workdir / "leaf.csr", workdir / "leaf.pem"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={names[0]}")
    ext = workdir / "leaf.ext"
    ext.write_text("subjectAltName=" + ",".join(f"DNS:{n}" for n in names) + ",IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "2", "-extfile", str(ext))
    store = workdir / "system-store"
    store.mkdir(exist_ok=True)
    digest = _openssl("x509", "-hash", "-noout", "-in", str(ca_cert)).strip()
    (store / f"{digest}.0").write_bytes(ca_cert.read_bytes())
    return Ca(ca_cert, cert, key, store)


class InspectingProxy:
    def __init__(self, ca: Ca, origin_port: int) -> None:
        self.ca, self.origin_port = ca, origin_port
        self.connects: list[str] = []
        self._server: Optional[socketserver.ThreadingTCPServer] = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "InspectingProxy":
        owner = self
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(self.ca.leaf_cert), str(self.ca.leaf_key))

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                if not line.startswith("CONNECT "):
                    sock.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    return
                owner.connects.append(line.split()[1])
                sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                try:
                    inner = tls.wrap_socket(sock, server_side=True)
                except (ssl.SSLError, OSError):
                    return  # the client refused our certificate: what a client without the CA does
                origin = socket.create_connection(("127.0.0.1", owner.origin_port))
                _relay(inner, origin)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _relay(a: socket.socket, b: socket.socket) -> None:
    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join(timeout=30)
