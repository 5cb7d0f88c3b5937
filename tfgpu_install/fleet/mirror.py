"""One download per fleet: a pull-through PEP 503 index the controller serves to its nodes.

`fleet ... --serve-index ADDR` starts it on ADDR (an address of this controller that the nodes route to,
on the fleet's own network; `auto` finds it from the hosts' addresses; a wildcard only when asked) in
front of the upstream index (--index-url, else PyPI). The nodes get only its URL, which carries a token
made for this run as its credentials (http://tfgpu:TOKEN@ADDR:PORT/simple/: pip and uv send them as HTTP
Basic auth, keep them out of their logs and out of their cache keys, so a node's cache still serves the
next run); a request without them is answered 401. The tool's bootstrap (its own dependencies too) and
every env install go through it, so they never reach the upstream index.

At fleet scale: the listen backlog is sized to the forks (Python's default of 5 dropped connections
from 200 nodes at once), connections are kept alive (HTTP/1.1), `Range` is answered, and a file not yet
cached is streamed to the first nodes while it is fetched (download.py: one fetch per file however many
ask, the sha256 checked at the end, the cached copy published only when it matches, a `.part` per run,
resumed by a later run when this one ends first).

Pages are rewritten so that each file link points back here as /files/<token>/<filename>, the
token being the sha256 of the upstream URL the page named; only tokens from pages this mirror fetched
are served (it is not an open proxy). A link's #sha256= fragment is kept (pip and uv check it too).
PEP 658 metadata attributes are dropped (clients then read the wheel, which is cached anyway). Error
bodies never carry the upstream URL or its credentials.

Counters: upstream_bytes (fetched from the upstream index) and served_bytes (sent to nodes).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO, Mapping, Optional, cast
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from tfgpu_install.errors import UsageError
from tfgpu_install.fleet.download import CHUNK, Download, DownloadFailed, Target
from tfgpu_install.guard.jsondoc import JSONObject

DEFAULT_UPSTREAM = "https://pypi.org/simple/"
MAX_PAGE_BYTES = 16 << 20  # a project page (PyPI's largest are a few MB)
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 20.0, 120.0
# Files sent at once (the others queue): the nodes fetch concurrently, the controller's link is shared.
MAX_CONCURRENT_SENDS = 64
# Connections waiting to be accepted: every fork's client may connect at once (uv opens several each).
MIN_BACKLOG, BACKLOG_PER_FORK = 1024, 16
# An idle kept-alive connection is closed after this long.
IDLE_S = 60.0
USER = "tfgpu"  # the user name of the nodes' credentials (the token is the password)
_RANGE = re.compile(r"^bytes=(\d{0,15})-(\d{0,15})$")
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

    def to_json(self) -> JSONObject:
        return {"upstream_bytes": self.upstream_bytes, "served_bytes": self.served_bytes,
                "upstream_requests": self.upstream_requests, "served_requests": self.served_requests,
                "files": len(self.files)}


def redact(url: str) -> str:
    """The URL without its user:password@ (for anything shown or sent to a node)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def backlog_for(forks: int) -> int:
    return max(MIN_BACKLOG, BACKLOG_PER_FORK * forks)


def check_upstream(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the upstream index {redact(url)!r} is not an http(s) URL",
                         "give --index-url https://HOST/simple/ (or the user's own http mirror)", ref="bad-url")
    return url if url.endswith("/") else url + "/"


def rewrite_page(page: str, page_url: str, links: dict[str, Link], prefix: str = "") -> str:
    """Each anchor's href -> <prefix>/files/<token>/<filename>[#sha256=...]; metadata attributes dropped.
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
        new = f"{prefix}/files/{token}/{quote(name)}" + (f"#sha256={sha}" if sha else "")
        return tag.replace(h.group(0), f'href="{html.escape(new)}"')

    return _ANCHOR.sub(anchor, page)


class FleetMirror:
    """The server (a daemon thread); start() -> url, stop()."""

    def __init__(self, upstream: str, cache_dir: Path, bind: str, port: int = 0, forks: int = 1,
                 token: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> None:
        self.upstream = check_upstream(upstream)
        self.environ = dict(environ or {})  # the tool's one TLS trust (fetch/trust.py) reads its CA settings
        self.cache_dir = cache_dir
        self.bind, self.port = bind, port
        self.backlog = backlog_for(forks)
        # This run's token: the nodes' URL carries it (Basic auth); a request without it is answered 401.
        self.token = token or secrets.token_urlsafe(18)
        self._auth = "Basic " + base64.b64encode(f"{USER}:{self.token}".encode()).decode()
        self.stats = Stats()
        self.links: dict[str, Link] = {}
        self.pages: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._page_locks: dict[str, threading.Lock] = {}
        self._downloads: dict[str, Download] = {}
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._session: Any = None
        self._sends = threading.BoundedSemaphore(MAX_CONCURRENT_SENDS)

    @property
    def shown_upstream(self) -> str:
        return redact(self.upstream)

    # --- upstream ---------------------------------------------------------------------------

    def _get(self, url: str, start: Optional[int] = None) -> Any:
        import requests

        with self._lock:
            if self._session is None:
                from tfgpu_install.fetch.trust import mount

                self._session = requests.Session()
                mount(self._session, self.environ, {})
            self.stats.upstream_requests += 1
            session = self._session
        headers = {"Accept": "text/html"} if start is None else {"Range": f"bytes={start}-"}
        return session.get(url, stream=True, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S), headers=headers)

    def _count_upstream(self, n: int) -> None:
        with self._lock:
            self.stats.upstream_bytes += n

    def page(self, project: str) -> Optional[bytes]:
        """The rewritten project page (fetched once), or None when upstream has no such project."""
        key = canonical(project)
        with self._lock:
            lock = self._page_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self.pages:
                return self.pages[key]
            url = urljoin(self.upstream, quote(key) + "/")
            r = self._get(url)
            try:
                if r.status_code == 404:
                    return None
                if r.status_code != 200:
                    raise DownloadFailed(f"upstream answered HTTP {r.status_code} for the {key} page")
                body = b""
                for chunk in r.iter_content(CHUNK):
                    body += chunk
                    if len(body) > MAX_PAGE_BYTES:
                        raise DownloadFailed(f"the {key} page is larger than {MAX_PAGE_BYTES} bytes")
            finally:
                r.close()
            with self._lock:
                self.stats.upstream_bytes += len(body)
                links: dict[str, Link] = {}
                text = rewrite_page(body.decode("utf-8", "replace"), r.url or url, links)
                self.links.update(links)
                self.pages[key] = text.encode()
            return self.pages[key]

    def cached(self, token: str) -> Optional[Path]:
        path = self.cache_dir / token
        return path if path.is_file() else None

    def download(self, token: str) -> Optional[Download]:
        """The one fetch of a token a page named (started by the first to ask), or None when no page named it."""
        with self._lock:
            link = self.links.get(token)
            if link is None:
                return None
            got = self._downloads.get(token)
            # A failed fetch is tried again by the next asker, as soon as it failed (not once it has finished:
            # an asker handed a failing fetch got nothing at all).
            if got is None or got.failed():
                got = Download(Target(link.url, link.sha256, self.cache_dir / token), self._get,
                               self._count_upstream)
                self._downloads[token] = got.start()
            return got

    def file_done(self, token: str) -> None:
        with self._lock:
            self.stats.files.add(token)

    # --- serving ------------------------------------------------------------------------------

    def start(self) -> str:
        try:
            self._server = _Server((self.bind, self.port), self)
        except OSError as exc:
            raise UsageError(f"cannot serve the fleet's index on {self.bind}:{self.port}: {exc.strerror or exc}",
                             "give --serve-index an address of this machine that the nodes reach (or `auto`)",
                             ref="serve-index") from exc
        self._thread = threading.Thread(target=self._server.serve_forever, name="fleet-mirror", daemon=True)
        self._thread.start()
        host = self.bind if ":" not in self.bind else f"[{self.bind}]"
        return f"http://{USER}:{self.token}@{host}:{self._server.server_address[1]}/simple/"

    def authorized(self, header: Optional[str]) -> bool:
        return header is not None and hmac.compare_digest(header.encode(), self._auth.encode())

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            for dl in self._downloads.values():
                dl.cancelled = True
            if self._session is not None:
                self._session.close()
                self._session = None


class _Handler(BaseHTTPRequestHandler):
    """One request to the fleet's index: a project page or a file its pages named."""

    protocol_version = "HTTP/1.1"  # keep-alive: a node's many requests share a connection
    timeout = IDLE_S
    head = False

    @property
    def mirror(self) -> FleetMirror:
        return cast(_Server, self.server).mirror

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _count(self, n: int, request: bool = False) -> None:
        with self.mirror._lock:  # counted before the client can have read it
            self.mirror.stats.served_bytes += n
            self.mirror.stats.served_requests += int(request)

    def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.head:
            return
        self._count(len(body), request=True)
        self.wfile.write(body)

    def do_HEAD(self) -> None:  # uv asks before it reads a wheel
        self.head = True  # per request: a kept-alive connection's next GET must get its body
        try:
            self._answer()
        finally:
            self.head = False

    def do_GET(self) -> None:
        self.head = False
        self._answer()

    def _answer(self) -> None:
        if not self.mirror.authorized(self.headers.get("Authorization")):
            # Not this run's credentials: nothing is said about what is here (the challenge makes pip and uv
            # send the credentials their index URL carries).
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="tfgpu-install fleet index"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
        try:
            if len(parts) == 2 and parts[0] == "simple" and _PROJECT.match(parts[1]):
                body = self.mirror.page(parts[1])
                if body is None:
                    return self._send(404, b"no such project upstream\n")
                return self._send(200, body, "text/html; charset=utf-8")
            if len(parts) == 3 and parts[0] == "files" and _FILENAME.match(parts[2]):
                return self._file(parts[1])
            return self._send(404, b"not found\n")
        except DownloadFailed as exc:  # our own words: no URL, no credentials
            return self._send(502, f"upstream: {exc}\n".encode())
        except OSError as exc:  # requests' errors name the URL (and its user:password@): only the kind is said
            return self._send(502, f"upstream: {type(exc).__name__}\n".encode())

    def _range(self, size: Optional[int]) -> Optional[tuple[int, int]]:
        """(first, last) of a single `Range: bytes=A-B`, `bytes=A-` or `bytes=-N` (the last N: uv reads a wheel's
        metadata so) this file can answer; None: the whole file (a Range we do not take is ignored, as HTTP
        allows); (-1, -1): not satisfiable."""
        m = _RANGE.match(self.headers.get("Range") or "")
        if m is None or size is None or not (m.group(1) or m.group(2)):
            return None
        if not m.group(1):  # the last N bytes
            n = int(m.group(2))
            return (max(0, size - n), size - 1) if n and size else (-1, -1)
        first = int(m.group(1))
        last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        return (first, last) if first <= last else (-1, -1)

    def _head(self, size: Optional[int], span: Optional[tuple[int, int]]) -> None:
        if span is not None and size is not None:
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {span[0]}-{span[1]}/{size}")
            self.send_header("Content-Length", str(span[1] - span[0] + 1))
        else:
            self.send_response(200)
            if size is not None:
                self.send_header("Content-Length", str(size))
            else:
                self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def _file(self, token: str) -> None:
        path = self.mirror.cached(token)
        if path is None and token not in self.mirror.links:
            return self._send(404, b"not a file any page of this mirror named\n")
        if path is not None:
            size = path.stat().st_size
            span = self._range(size)
            if span == (-1, -1):
                return self._send(416, b"range not satisfiable\n")
            self._head(size, span)
            if not self.head:
                self._count(0, request=True)
                with self.mirror._sends, path.open("rb") as f:
                    self._copy(f, *(span or (0, size - 1)))
            return None
        dl = self.mirror.download(token)
        if dl is None:
            return self._send(404, b"not a file any page of this mirror named\n")
        dl.wait_started()
        if dl.done and not dl.ok:
            return self._send(502, f"upstream: {dl.error}\n".encode())
        span = self._range(dl.total)
        if span == (-1, -1):
            return self._send(416, b"range not satisfiable\n")
        self._head(dl.total, span)
        if self.head:
            return None
        self._count(0, request=True)
        with self.mirror._sends:
            self._follow(dl, span)
        if dl.ok:
            self.mirror.file_done(token)
        return None

    def _copy(self, f: BinaryIO, first: int, last: int) -> None:
        f.seek(first)
        left = last - first + 1
        while left > 0:
            chunk = f.read(min(CHUNK, left))
            if not chunk:
                raise ConnectionAbortedError("the cached file shrank")
            left -= len(chunk)
            self._count(len(chunk))
            self.wfile.write(chunk)

    def _follow(self, dl: Download, span: Optional[tuple[int, int]]) -> None:
        """Send the file as it comes in; on a failed hash check the connection is closed short (the client
        sees a truncated download, never a complete bad one)."""
        chunked = dl.total is None
        pos, end = span if span is not None else (0, None)
        f = dl.open()
        try:
            while True:
                try:
                    ready, finished = dl.readable(pos)
                except DownloadFailed:
                    self.close_connection = True
                    return
                if f is None:
                    f = dl.open()
                    if f is None:
                        self.close_connection = True
                        return
                stop = ready if end is None else min(ready, end + 1)
                f.seek(pos)
                while pos < stop:
                    chunk = f.read(min(CHUNK, stop - pos))
                    if not chunk:
                        break
                    pos += len(chunk)
                    self._count(len(chunk))
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                if finished or (end is not None and pos > end):
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                    return
        finally:
            if f is not None:
                f.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], mirror: FleetMirror) -> None:
        self.mirror = mirror
        self.request_queue_size = mirror.backlog  # read by server_activate's listen()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a node that hung up mid-file is not the controller's problem
