"""One download per fleet: a pull-through PEP 503 index the controller serves to its nodes.

`fleet ... --serve-index ADDR` starts it on ADDR (an address of this controller that the nodes reach,
on the fleet's own network) in front of the upstream index (--index-url, else PyPI). The nodes get
only its URL: the tool's bootstrap (its own dependencies too) and every env install go through it,
so they never reach the upstream index. Each project page and each file is fetched from upstream
once, however many nodes ask at the same time (one lock per file: the others wait for that download),
kept under the controller's cache, and served to every node from there (at most MAX_CONCURRENT_SENDS
files at once; the other requests wait their turn).

Pages are rewritten so that each file link points back here as /files/<token>/<filename>, the token
being the sha256 of the upstream URL the page named; only tokens from pages this mirror fetched are
served (it is not an open proxy). A link's #sha256= fragment is kept (pip and uv check it), and the
mirror checks the bytes it fetched against it before anything is served. PEP 658 metadata attributes
are dropped (clients then read the wheel, which is cached anyway).

Counters: upstream_bytes (fetched from the upstream index) and served_bytes (sent to nodes).
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping, Optional, cast
from urllib.parse import quote, unquote, urljoin, urlsplit

from tfgpu_install.errors import UsageError

DEFAULT_UPSTREAM = "https://pypi.org/simple/"
MAX_PAGE_BYTES = 16 << 20  # a project page (PyPI's largest are a few MB)
MAX_FILE_BYTES = 8 << 30  # one file (the largest CUDA wheels are ~3 GB)
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 20.0, 120.0
CHUNK = 1 << 20
# Files sent at once (the others queue): the nodes fetch concurrently, the controller's link is shared.
MAX_CONCURRENT_SENDS = 64
_PROJECT = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
_FILENAME = re.compile(r"^[A-Za-z0-9._+!-]{1,255}$")
_ANCHOR = re.compile(r"<a\s[^>]*>", re.IGNORECASE)
_HREF = re.compile(r"""href\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_METADATA_ATTR = re.compile(r"""\s+data-(?:dist-info|core)-metadata\s*=\s*(["']).*?\1""", re.IGNORECASE | re.DOTALL)


def canonical(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


@dataclass
class Link:
    url: str
    sha256: Optional[str]


@dataclass
class Stats:
    upstream_bytes: int = 0
    served_bytes: int = 0
    upstream_requests: int = 0
    served_requests: int = 0
    files: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"upstream_bytes": self.upstream_bytes, "served_bytes": self.served_bytes,
                "upstream_requests": self.upstream_requests, "served_requests": self.served_requests,
                "files": len(self.files)}


def check_upstream(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the upstream index {url!r} is not an http(s) URL",
                         "give --index-url https://HOST/simple/ (or the user's own http mirror)", ref="bad-url")
    return url if url.endswith("/") else url + "/"


def rewrite_page(page: str, page_url: str, links: dict[str, Link]) -> str:
    """Each anchor's href -> /files/<token>/<filename>[#sha256=...]; metadata attributes dropped.
    `links` gains token -> upstream URL and expected sha256 (pure but for that mapping)."""

    def anchor(m: "re.Match[str]") -> str:
        tag = _METADATA_ATTR.sub("", m.group(0))
        h = _HREF.search(tag)
        if h is None:
            return tag
        target = urljoin(page_url, html.unescape(h.group(2)))
        url, _, fragment = target.partition("#")
        parts = urlsplit(url)
        name = unquote(parts.path.rsplit("/", 1)[-1])
        if parts.scheme not in ("http", "https") or not _FILENAME.match(name):
            return tag.replace(h.group(0), 'href=""')
        sha = None
        if fragment.startswith("sha256=") and re.fullmatch(r"[0-9a-fA-F]{64}", fragment[7:]):
            sha = fragment[7:].lower()
        token = hashlib.sha256(url.encode()).hexdigest()[:32]
        links[token] = Link(url, sha)
        new = f"/files/{token}/{quote(name)}" + (f"#sha256={sha}" if sha else "")
        return tag.replace(h.group(0), f'href="{html.escape(new)}"')

    return _ANCHOR.sub(anchor, page)


class FleetMirror:
    """The server (a daemon thread); start() -> url, stop()."""

    def __init__(self, upstream: str, cache_dir: Path, bind: str, port: int = 0,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self.upstream = check_upstream(upstream)
        self.environ = dict(environ or {})  # the tool's one TLS trust (fetch/trust.py) reads its CA settings
        self.cache_dir = cache_dir
        self.bind, self.port = bind, port
        self.stats = Stats()
        self.links: dict[str, Link] = {}
        self.pages: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._file_locks: dict[str, threading.Lock] = {}
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._session: Any = None
        self._sends = threading.BoundedSemaphore(MAX_CONCURRENT_SENDS)

    # --- upstream ---------------------------------------------------------------------------

    def _get(self, url: str) -> Any:
        import requests

        if self._session is None:
            from tfgpu_install.fetch.trust import mount

            self._session = requests.Session()
            mount(self._session, self.environ, {})
        self.stats.upstream_requests += 1
        return self._session.get(url, stream=True, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                                 headers={"Accept": "text/html"})

    def page(self, project: str) -> Optional[bytes]:
        """The rewritten project page (fetched once), or None when upstream has no such project."""
        key = canonical(project)
        with self._lock:
            lock = self._file_locks.setdefault("page:" + key, threading.Lock())
        with lock:
            if key in self.pages:
                return self.pages[key]
            url = urljoin(self.upstream, quote(key) + "/")
            r = self._get(url)
            try:
                if r.status_code == 404:
                    return None
                r.raise_for_status()
                body = b""
                for chunk in r.iter_content(CHUNK):
                    body += chunk
                    if len(body) > MAX_PAGE_BYTES:
                        raise OSError(f"{url}: the page is larger than {MAX_PAGE_BYTES} bytes")
            finally:
                r.close()
            with self._lock:
                self.stats.upstream_bytes += len(body)
                links: dict[str, Link] = {}
                text = rewrite_page(body.decode("utf-8", "replace"), r.url or url, links)
                self.links.update(links)
                self.pages[key] = text.encode()
            return self.pages[key]

    def file(self, token: str) -> Optional[Path]:
        """The cached file for a token a page named (fetched once, checked against its sha256)."""
        with self._lock:
            link = self.links.get(token)
            lock = self._file_locks.setdefault(token, threading.Lock())
        if link is None:
            return None
        path = self.cache_dir / token
        with lock:
            if path.is_file():
                return path
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(".part")
            digest, size = hashlib.sha256(), 0
            r = self._get(link.url)
            try:
                r.raise_for_status()
                with part.open("wb") as f:
                    for chunk in r.iter_content(CHUNK):
                        size += len(chunk)
                        if size > MAX_FILE_BYTES:
                            raise OSError(f"{link.url}: larger than {MAX_FILE_BYTES} bytes")
                        digest.update(chunk)
                        f.write(chunk)
            except BaseException:
                part.unlink(missing_ok=True)
                raise
            finally:
                r.close()
                with self._lock:
                    self.stats.upstream_bytes += size
            if link.sha256 and digest.hexdigest() != link.sha256:
                part.unlink(missing_ok=True)
                raise OSError(f"{link.url}: sha256 {digest.hexdigest()} is not the {link.sha256} its page names")
            os.replace(part, path)
            with self._lock:
                self.stats.files.add(token)
            return path

    # --- serving ------------------------------------------------------------------------------

    def start(self) -> str:
        try:
            self._server = _Server((self.bind, self.port), self)
        except OSError as exc:
            raise UsageError(f"cannot serve the fleet's index on {self.bind}:{self.port}: {exc}",
                             "give --serve-index an address of this machine that the nodes reach",
                             ref="serve-index") from exc
        self._thread = threading.Thread(target=self._server.serve_forever, name="fleet-mirror", daemon=True)
        self._thread.start()
        host = self.bind if ":" not in self.bind else f"[{self.bind}]"
        return f"http://{host}:{self._server.server_address[1]}/simple/"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._session is not None:
            self._session.close()
            self._session = None


class _Handler(BaseHTTPRequestHandler):
    """One request to the fleet's index: a project page or a file its pages named."""

    @property
    def mirror(self) -> FleetMirror:
        return cast(_Server, self.server).mirror

    def log_message(self, format: str, *args: object) -> None:
        return None

    head = False

    def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.head:
            return
        with self.mirror._lock:  # counted before the client can have read it
            self.mirror.stats.served_bytes += len(body)
            self.mirror.stats.served_requests += 1
        self.wfile.write(body)

    def do_HEAD(self) -> None:  # uv asks before it reads a wheel
        self.head = True
        self.do_GET()

    def do_GET(self) -> None:
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
        try:
            if len(parts) == 2 and parts[0] == "simple" and _PROJECT.match(parts[1]):
                body = self.mirror.page(parts[1])
                if body is None:
                    return self._send(404, b"no such project upstream\n")
                return self._send(200, body, "text/html; charset=utf-8")
            if len(parts) == 3 and parts[0] == "files" and _FILENAME.match(parts[2]):
                path = self.mirror.file(parts[1])
                if path is None:
                    return self._send(404, b"not a file any page of this mirror named\n")
                return self._file(path)
            return self._send(404, b"not found\n")
        except OSError as exc:  # includes requests' errors: upstream unreachable, bad bytes
            return self._send(502, f"upstream: {exc}\n".encode())

    def _file(self, path: Path) -> None:
        size = path.stat().st_size
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if self.head:
            return
        with self.mirror._lock:
            self.mirror.stats.served_requests += 1
        with self.mirror._sends, path.open("rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                with self.mirror._lock:  # counted before the client can have read it
                    self.mirror.stats.served_bytes += len(chunk)
                self.wfile.write(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], mirror: FleetMirror) -> None:
        self.mirror = mirror
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a node that hung up mid-file is not the controller's problem
