"""Downloads into a cache keyed by sha256: streamed, resumable, retried, checked while streaming.

Layout: <cache_dir>/downloads/<sha256> is a complete, verified file; <sha256>.part is an
interrupted one that the next attempt resumes with an HTTP Range request. A file is only
ever renamed to its final name after its hash matched, so a cache hit never needs the
network. On any failure nothing is left but a resumable .part (a part whose bytes
proved wrong is deleted: resuming it could never succeed).

urllib3's Retry (mounted on the Session) retries refused connections and 5xx answers
with backoff; a connection cut *while the body streams* is invisible to it, so the loop
here resumes from the bytes already on disk.
"""

from __future__ import annotations

import hashlib
import os
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, NoReturn, Optional
from urllib.parse import urljoin, urlsplit

from tfgpu_install.context import Context
from tfgpu_install.errors import DownloadError, UsageError, disk_full, is_disk_full

if TYPE_CHECKING:  # requests is imported lazily: `probe` must start fast
    import requests

CHUNK = 1 << 16
MAX_TEXT = 16 * 1024 * 1024  # fetch_text: a manifest or an index page, never more
# The overall deadline of one download (all attempts): generous for a slow line (128 KiB/s)
# plus half an hour; an idle connection is cut sooner by the per-read `timeout`.
DEADLINE_BASE = 1800.0
DEADLINE_RATE = 128 * 1024
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@dataclass(frozen=True)
class Downloaded:
    path: Path
    sha256: str
    size: int
    cached: bool  # True: served from the cache, no request made
    resumed: bool  # True: a Range request continued an earlier partial download


def downloads_dir(ctx: Context) -> Path:
    return ctx.cache_dir / "downloads"


def cached_path(ctx: Context, sha256: str) -> Path:
    return downloads_dir(ctx) / sha256.lower()


def check_url(url: str, *, allow_http: bool = False) -> None:
    """HTTPS for remote hosts. Plain http only to loopback, or when the user named an
    http mirror themselves (allow_http)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and (allow_http or (parts.hostname or "") in LOOPBACK):
        return
    if parts.scheme == "http":
        raise UsageError(
            f"refusing to download over plain http: {url}",
            "use an https:// URL, or name the http mirror yourself with --cudnn-mirror",
            ref="insecure-url",
        )
    raise UsageError(
        f"unsupported URL scheme {parts.scheme!r}: {url}",
        "give an https:// URL (or http:// for a mirror you name with --cudnn-mirror)",
        ref="bad-url",
    )


def proxies_for(environ: Mapping[str, str], url: str) -> dict[str, str]:
    """Proxies from the Context's environment (requests would read os.environ itself)."""
    found: dict[str, str] = {}
    for scheme in ("http", "https", "all"):
        for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY"):
            if environ.get(name):
                found[scheme] = environ[name]
                break
    no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY")
    host = urlsplit(url).hostname or ""
    if host in LOOPBACK:
        return {}
    if no_proxy and urllib.request.proxy_bypass_environment(host, {"no": no_proxy}):  # type: ignore[attr-defined]
        return {}
    return found


def refuse_downgrade(url: str, target: str, *, allow_http: bool = False) -> None:
    """One redirect hop from `url` to `target`: https never leads to plain http (a proxy or a
    compromised mirror could then serve anything), unless the user named an http mirror."""
    if allow_http or urlsplit(url).scheme != "https" or urlsplit(target).scheme == "https":
        return
    raise DownloadError(
        f"refusing to follow a redirect from https to plain http: {url} -> {target}",
        "the server (or a proxy) downgraded the connection; use an https mirror that stays on "
        "https, or, if you trust the network, name the http mirror yourself with --cudnn-mirror http://...",
        ref="insecure-redirect",
    )


def _redirect_hook(allow_http: bool) -> Callable[..., Any]:
    def check(resp: "requests.Response", *args: Any, **kwargs: Any) -> "requests.Response":
        # requests calls response hooks on every hop, before it follows the redirect.
        if resp.is_redirect:
            target = urljoin(resp.url, resp.headers.get("Location", ""))
            try:
                refuse_downgrade(resp.url, target, allow_http=allow_http)
                check_url(target, allow_http=allow_http)  # every hop meets the first URL's rule
            except DownloadError:
                resp.close()
                raise
            except UsageError as exc:  # a redirect to ftp:// and the like
                resp.close()
                raise DownloadError(f"refusing to follow a redirect to {target}: {exc.message}", exc.hint,
                                    ref="insecure-redirect") from exc
        return resp

    return check


def make_session(
    ctx: Context, url: str, retries: int = 3, backoff: float = 0.5, *, allow_http: bool = False
) -> "requests.Session":
    import requests
    from urllib3.util.retry import Retry

    from tfgpu_install.fetch.trust import mount

    session = requests.Session()
    session.trust_env = False  # the Context, not os.environ, is the source of settings
    session.proxies.update(proxies_for(ctx.environ, url))
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=backoff,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD"}),
        raise_on_status=False,
    )
    # One trust (fetch/trust.py): the system store plus SSL_CERT_FILE/REQUESTS_CA_BUNDLE where set, as uv has.
    mount(session, ctx.environ, {"max_retries": retry})
    session.headers["User-Agent"] = "tfgpu-install"
    session.hooks["response"].append(_redirect_hook(allow_http))
    return session


def _backoff(ctx: Context) -> float:
    # Tests set it to 0 through the Context's test hooks; users get a polite pause.
    return float(ctx.hooks.download_backoff)


def _connect_error(url: str, exc: Exception) -> DownloadError:
    host = urlsplit(url).netloc
    text = str(exc)
    why = "connection refused" if "refused" in text.lower() else "cannot connect"
    return DownloadError(
        f"{why} to {host} while fetching {url}",
        "check the URL and your network/proxy settings (HTTPS_PROXY, NO_PROXY), "
        "or download the file by hand and pass it with --cudnn-archive",
        ref="download-connect",
    )


def _http_error(url: str, status: int) -> DownloadError:
    if status == 404:
        return DownloadError(
            f"not found (HTTP 404): {url}",
            "check the version and --cudnn-mirror URL; the mirror must hold NVIDIA's "
            "redist layout (redistrib_<version>.json beside cudnn/<platform>/...)",
            ref="download-not-found",
        )
    return DownloadError(
        f"HTTP {status} from {url}",
        "the server refused the request; try again later or use another mirror",
        ref="download-http",
    )


def fetch_text(ctx: Context, url: str, *, allow_http: bool = False, timeout: float = 30) -> str:
    """A small document (a manifest, an index page); not cached."""
    import requests

    check_url(url, allow_http=allow_http)
    with make_session(ctx, url, backoff=_backoff(ctx), allow_http=allow_http) as session:
        deadline_at = time.monotonic() + DEADLINE_BASE
        try:
            with session.get(url, timeout=timeout, stream=True) as resp:
                if resp.status_code != 200:
                    raise _http_error(url, resp.status_code)
                body = bytearray()
                for chunk in _chunks(resp):
                    body += chunk
                    if len(body) > MAX_TEXT:
                        raise DownloadError(f"{url} sent more than {MAX_TEXT} bytes: not a manifest or index page",
                                            "check the URL (--cudnn-redist-url, the mirror)", ref="download-oversized")
                    _check_deadline(deadline_at, url, DEADLINE_BASE)
                return body.decode(resp.encoding or "utf-8", errors="replace")
        except requests.ConnectionError as exc:
            raise _connect_error(url, exc) from exc
        except requests.RequestException as exc:
            raise DownloadError(f"fetching {url} failed: {exc}", "try again", ref="download-failed") from exc
        except Exception as exc:
            if type(exc).__module__.startswith(("urllib3", "http.client")):
                raise DownloadError(f"fetching {url} failed: {exc}", "try again", ref="download-failed") from exc
            raise


def _chunks(resp: "requests.Response") -> Iterator[bytes]:
    """The body as it arrives: read1() returns what the socket has (a byte dripped every few
    seconds still gives the loop its turn to check the deadline); iter_content on urllib3 1.x."""
    read1 = getattr(resp.raw, "read1", None)
    if read1 is None:  # pragma: no cover - urllib3 < 2
        yield from resp.iter_content(CHUNK)
        return
    while True:
        chunk = read1(CHUNK, decode_content=True)
        if not chunk:
            return
        yield chunk


def _check_deadline(deadline_at: float, url: str, budget: float) -> None:
    if time.monotonic() > deadline_at:
        raise DownloadError(
            f"download of {url} is too slow: not done within its deadline ({budget:.0f} s)",
            "run the same command again later to resume it, or download the file by hand "
            "(a mirror, --cudnn-archive)",
            ref="download-too-slow",
        )


def fetch(
    ctx: Context,
    url: str,
    sha256: str,
    *,
    size: Optional[int] = None,
    allow_http: bool = False,
    what: Optional[str] = None,
    attempts: int = 4,
    timeout: float = 60,
    deadline: Optional[float] = None,
) -> Downloaded:
    """The verified file for `sha256`, from the cache or downloaded from `url`. Never more than
    `size` bytes are taken (a longer stream is refused); `timeout` bounds each idle read,
    `deadline` (default: DEADLINE_BASE + size at DEADLINE_RATE) the whole download."""
    from tfgpu_install.guard.trust import require

    sha256 = sha256.lower()
    final = cached_path(ctx, sha256)
    label = what or Path(urlsplit(url).path).name or url
    for kept in (final, final.with_name(sha256 + ".part")):
        # checked, then used: a file another user can swap must not be the one installed
        require(kept, ctx.cache_dir, "the cached download")
    if final.is_file():
        # A cache hit is trusted only after re-hashing: a file damaged on disk is fetched again.
        if _sha256_file(final) == sha256:
            return Downloaded(final, sha256, final.stat().st_size, cached=True, resumed=False)
        final.unlink()
    check_url(url, allow_http=allow_http)
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(sha256 + ".part")
    if size is not None and part.is_file() and part.stat().st_size == size and _sha256_file(part) == sha256:
        os.replace(part, final)  # a run killed between the last byte and the rename
        return Downloaded(final, sha256, size, cached=True, resumed=False)
    resumed = False
    last: Optional[BaseException] = None
    budget = deadline if deadline is not None else DEADLINE_BASE + (size or 0) / DEADLINE_RATE
    deadline_at = time.monotonic() + budget
    with make_session(ctx, url, backoff=_backoff(ctx), allow_http=allow_http) as session:
        for attempt in range(attempts):
            if attempt:
                time.sleep(_backoff(ctx) * (2 ** (attempt - 1)))
                _check_deadline(deadline_at, url, budget)
            try:
                done, did_resume, got = _stream(ctx, session, url, part, size, label, timeout, (deadline_at, budget))
            except _Interrupted as exc:
                last = exc.cause
                continue
            resumed = resumed or did_resume
            _finish(part, final, sha256, got, size, url, done)
            return Downloaded(final, sha256, final.stat().st_size, cached=False, resumed=resumed)
    have = part.stat().st_size if part.exists() else 0
    of = f" of {size}" if size else ""
    raise DownloadError(
        f"download of {label} kept failing: the server closed the connection mid-stream "
        f"({have}{of} bytes received after {attempts} attempts; last error: {last})",
        f"run the same command again to resume from {part}, or download {url} by hand "
        "and pass it with --cudnn-archive",
        ref="download-interrupted",
    )


class _Interrupted(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    _hash_into(h, path)
    return h.hexdigest()


def _request(session: "requests.Session", url: str, timeout: float, have: int) -> "requests.Response":
    """GET the body from byte `have` on; a refused connection is final, any other failure resumable."""
    import requests

    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        return session.get(url, stream=True, timeout=timeout, headers=headers)
    except requests.ConnectionError as exc:
        if "refused" in str(exc).lower() or "Max retries" in str(exc):
            raise _connect_error(url, exc) from exc
        raise _Interrupted(exc) from exc
    except requests.RequestException as exc:
        raise _Interrupted(exc) from exc


def _expected_total(resp: "requests.Response", have: int, size: Optional[int], part: Path, url: str) -> Optional[int]:
    """The whole file's size: the manifest's, else what the server announces; a server announcing
    more than the manifest allows is refused before a byte is written."""
    announced = resp.headers.get("Content-Length", "")
    if size is not None and announced.isdigit() and have + int(announced) > size:
        _oversized(part, url, size, f"the server announces {have + int(announced)} bytes")
    if size is None and announced.isdigit():
        return have + int(announced)
    return size


def _stream(
    ctx: Context,
    session: "requests.Session",
    url: str,
    part: Path,
    size: Optional[int],
    label: str,
    timeout: float,
    deadline: tuple[float, float],
) -> tuple[int, bool, str]:
    """Append the rest of the body to `part`, hashing as it streams; (bytes on disk,
    resumed?, sha256 of the whole part).
    Raises _Interrupted when the connection dies mid-body (the .part stays for resume)."""
    import requests

    have = part.stat().st_size if part.exists() else 0
    if size is not None and have > size:
        part.unlink()  # longer than the file can be: not ours to resume
        have = 0
    resp = _request(session, url, timeout, have)
    with resp:
        if resp.status_code == 416 and have:
            # Our part covers the whole file already (or the server forgot it): start over.
            part.unlink()
            raise _Interrupted(RuntimeError("range not satisfiable; restarting"))
        if resp.status_code not in (200, 206):
            raise _http_error(url, resp.status_code)
        resumed = resp.status_code == 206 and have > 0
        digest = hashlib.sha256()
        if resumed:
            _hash_into(digest, part)  # the head already on disk, once
        else:
            have = 0  # the server ignored Range: take the whole body again
        total = _expected_total(resp, have, size, part, url)
        ctx.progress(label, float(have), float(total) if total else None)
        try:
            with open(part, "ab" if resumed else "wb") as fh:
                for chunk in _chunks(resp):
                    if size is not None and have + len(chunk) > size:
                        fh.close()
                        _oversized(part, url, size, "the server sent more")
                    _check_deadline(deadline[0], url, deadline[1])
                    fh.write(chunk)
                    digest.update(chunk)
                    have += len(chunk)
                    ctx.progress(label, float(have), float(total) if total else None)
                fh.flush()
                os.fsync(fh.fileno())
        except (requests.RequestException, ConnectionError) as exc:
            # (RequestException is an OSError too: it must be caught before the write errors.)
            raise _Interrupted(exc) from exc
        except OSError as exc:
            if is_disk_full(exc):
                left = f" of {label}" if total is None else f": the rest of {label}"
                raise disk_full(part, exc, None if total is None else total - have,
                                f"downloading{left} into the cache") from exc
            raise DownloadError(
                f"cannot write {part}: {exc}",
                "free disk space in the cache directory or point TFGPU_CACHE_DIR elsewhere",
                ref="download-write",
            ) from exc
        except Exception as exc:  # urllib3 ProtocolError/IncompleteRead surface unwrapped at times
            if type(exc).__module__.startswith(("urllib3", "http.client")):
                raise _Interrupted(exc) from exc
            raise
    return have, resumed, digest.hexdigest()


def _oversized(part: Path, url: str, size: int, why: str) -> NoReturn:
    """Longer than the manifest says the file is: not the file; nothing of it is kept."""
    part.unlink(missing_ok=True)
    raise DownloadError(f"{url} is larger than the {size} bytes its manifest records ({why})",
                        "the server or a proxy serves a different file; use another mirror or "
                        "download it by hand and pass it with --cudnn-archive", ref="download-oversized")


def _hash_into(digest: "hashlib._Hash", path: Path) -> None:
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)


def _finish(
    part: Path, final: Path, sha256: str, got: str, size: Optional[int], url: str, done: int
) -> None:
    """Check the complete part and give it its final name, or delete it and say why."""
    if size is not None and done < size:
        # The server ended the body cleanly but early: keep the part, a retry may resume.
        raise DownloadError(
            f"truncated download: got {done} of {size} bytes from {url}",
            f"run the command again to resume from {part}; if it repeats, the mirror holds a "
            "truncated copy: use another mirror or --cudnn-archive",
            ref="download-truncated",
        )
    if got != sha256 or (size is not None and done != size):
        part.unlink()
        raise DownloadError(
            f"checksum mismatch for {url}: expected sha256 {sha256}, got {got} ({done} bytes)",
            "the file on the server differs from its manifest (a broken mirror or an "
            "intercepting proxy); nothing was kept. Try again or use another mirror",
            ref="download-checksum",
        )
    os.replace(part, final)
