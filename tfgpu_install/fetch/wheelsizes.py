"""The download size of exact pins (`name==version`), asked of the package index before anything
changes: the PEP 691 JSON page's `size` (PEP 700) where the index gives it, else the file's
Content-Length from a HEAD request. Only for the confirmation (never on the no-op path or --json).

What is counted: the pinned packages' wheels for the target Python on this machine's platform.
What is not: their unpinned dependencies and requirements with ranges (uv picks those while it
installs); those are reported as "not counted", never guessed. The size on disk is an estimate
(`UNPACK_RATIO` times the download, labelled "~" and "estimate"): a wheel is a deflated zip and
shared libraries deflate to about half; the ratio is an assumption, not a measurement of these wheels.

With uv's own dry run (app/package_plan.py) the figures count what is already there (estimate()): every
wheel the run installs is known with its version, and which of them uv has to download; the ones in its
cache are no download, and when uv links its cache's files into the env (the same filesystem, link mode
not `copy`) they take no new space either: the env's files are more hard links to inodes already on disk.
"""

from __future__ import annotations

import html.parser
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    import ssl

PAGE_LIMIT = 4 << 20  # one project's index page
UNPACK_RATIO = 2.0
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PIN_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<ver>[A-Za-z0-9.+!_-]+)$")


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    size: Optional[int]


@dataclass
class Sizes:
    download: int = 0  # bytes of the wheels whose size the index told
    counted: list[str] = field(default_factory=list)  # name==version counted
    unknown: list[str] = field(default_factory=list)  # pins whose wheel or size was not found
    not_counted: list[str] = field(default_factory=list)  # ranges and unpinned: uv resolves them later
    cached: Optional[list[str]] = None  # name==version already in uv's cache (None: not known)
    linked: Optional[bool] = None  # uv links its cache's files into the env (None: not known)
    cached_size: int = 0  # the cached wheels' download size, counted when uv copies them (not linked)

    def line(self) -> str:
        if self.cached is not None:
            return self._line_with_cache(self.cached)
        from tfgpu_install.report import human_bytes

        if not self.counted and not self.unknown:
            return "download: unknown (no exact pins: uv picks the versions as it installs)"
        if not self.counted:
            return "download: unknown (the index did not tell the pinned wheels' sizes)"
        text = (f"download: {human_bytes(self.download)} for {len(self.counted)} pinned wheel(s), "
                f"~{human_bytes(int(self.download * UNPACK_RATIO))} on disk (estimate: {UNPACK_RATIO:g}x the download)")
        if self.unknown:
            text += f"; unknown for {', '.join(self.unknown)}"
        if self.not_counted:
            text += (f"; not counted: {len(self.not_counted)} requirement(s) with ranges, and all unpinned "
                     "dependencies (uv resolves them as it installs)")
        return text


    def _line_with_cache(self, cached: list[str]) -> str:
        from tfgpu_install.report import human_bytes

        wheels = len(self.counted) + len(self.unknown)
        if wheels == 0:
            text = f"download: none (all {len(cached)} wheel(s) are in uv's cache)"
        else:
            text = f"download: {human_bytes(self.download)} for {len(self.counted)} wheel(s) not in uv's cache"
            if cached:
                text += f" ({len(cached)} more in it already)"
        if self.unknown:
            text += f"; unknown for {', '.join(self.unknown)}"
        new = int(self.download * UNPACK_RATIO)
        if self.linked:
            text += (f"; ~{human_bytes(new)} more on disk (estimate: {UNPACK_RATIO:g}x the download; the cached "
                     "wheels' files are linked into the env from uv's cache: already on disk)")
        elif self.linked is False:
            both = int((self.download + self.cached_size) * UNPACK_RATIO)
            text += (f"; ~{human_bytes(both)} more on disk (estimate: {UNPACK_RATIO:g}x the download of all "
                     "of them: uv copies its cache's files into the env, on another filesystem or with "
                     "UV_LINK_MODE=copy)")
        else:
            text += f"; ~{human_bytes(new)} more on disk for the downloads (estimate); the cached ones: unknown"
        return text


def estimate(to_download: Sequence[str], cached: Sequence[str], linked: Optional[bool], index_url: str,
             python: Optional[str], timeout: float = 10, context: Optional["ssl.SSLContext"] = None) -> Sizes:
    """The download and new disk space of a run whose wheels uv named (name==version): `to_download`
    is not in its cache, `cached` is; `linked` whether uv links the cache's files into the env. Only the
    downloads are asked of the index (and the cached ones too when uv copies them)."""
    sizes = lookup(list(to_download), index_url, python, timeout, context)
    sizes.cached, sizes.linked = list(cached), linked
    if linked is False and cached:
        sizes.cached_size = lookup(list(cached), index_url, python, timeout, context).download
    return sizes


def split_pins(requirements: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(exact pins as (name, version), the rest)."""
    pins, rest = [], []
    for r in requirements:
        m = PIN_RE.match(r.strip())
        if m:
            pins.append((m["name"], m["ver"]))
        else:
            rest.append(r)
    return pins, rest


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: Optional[str] = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._href, self._text = dict(attrs).get("href") or "", ""

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, self._text.strip()))
            self._href = None


def parse_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """A project's files from its PEP 691 JSON or PEP 503 HTML page (sizes only from JSON)."""
    out: list[IndexFile] = []
    if content_type.startswith(JSON_TYPE):
        doc = json.loads(body.decode("utf-8"))
        files = doc.get("files") if isinstance(doc, dict) else None
        for f in files if isinstance(files, list) else []:
            if not isinstance(f, dict) or not isinstance(f.get("filename"), str) or not isinstance(f.get("url"), str):
                continue
            size = f.get("size")
            out.append(IndexFile(f["filename"], urllib.parse.urljoin(page_url, f["url"]),
                                 size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None))
        return out
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    for href, text in parser.links:
        url = urllib.parse.urljoin(page_url, href).split("#", 1)[0]
        name = text or urllib.parse.unquote(url.rsplit("/", 1)[-1])
        out.append(IndexFile(name, url, None))
    return out


def pick(files: Sequence[IndexFile], name: str, version: str, tags: Sequence[str]) -> Optional[IndexFile]:
    """The wheel uv would take for name==version: the first of `tags` (most preferred first) it matches."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    rank = {t: i for i, t in enumerate(tags)}
    best: Optional[tuple[int, IndexFile]] = None
    for f in files:
        if not f.filename.endswith(".whl"):
            continue
        try:
            wname, wver, _, wtags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, ValueError):
            continue
        if canonicalize_name(wname) != canonicalize_name(name) or str(wver) != version:
            continue
        ranks = [rank[str(t)] for t in wtags if str(t) in rank]
        if ranks and (best is None or min(ranks) < best[0]):
            best = (min(ranks), f)
    return best[1] if best else None


def target_tags(python: Optional[str]) -> list[str]:
    """The tags a CPython X.Y on this machine accepts, most preferred first."""
    from packaging import tags

    m = re.match(r"^(\d+)\.(\d+)", python or "")
    version = (int(m[1]), int(m[2])) if m else None
    found = list(tags.cpython_tags(python_version=version)) + list(tags.compatible_tags(python_version=version))
    return [str(t) for t in found]


def _get(url: str, timeout: float, method: str = "GET", accept: str = "",
         context: Optional["ssl.SSLContext"] = None) -> tuple[bytes, str, Optional[int]]:
    req = urllib.request.Request(url, method=method, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout, context=context) as r:  # noqa: S310 (the install's index)
        length = r.headers.get("Content-Length")
        body = r.read(PAGE_LIMIT + 1) if method == "GET" else b""
        if len(body) > PAGE_LIMIT:
            raise ValueError(f"{url}: index page over {PAGE_LIMIT >> 20} MiB")
        return body, r.headers.get("Content-Type", ""), int(length) if length and length.isdigit() else None


def lookup(requirements: Sequence[str], index_url: str, python: Optional[str], timeout: float = 10,
           context: Optional["ssl.SSLContext"] = None) -> Sizes:
    """Ask the index for each exact pin's wheel size. Anything the index does not answer is unknown.
    context: the tool's one TLS trust (fetch/trust.py)."""
    pins, rest = split_pins(requirements)
    sizes = Sizes(not_counted=list(rest))
    tags = target_tags(python)
    base = index_url.rstrip("/") + "/"
    reachable = True  # one unreachable index is not asked again for each pin (offline: one timeout)
    for name, version in pins:
        pin = f"{name}=={version}"
        if not reachable:
            sizes.unknown.append(pin)
            continue
        try:
            page = urllib.parse.urljoin(base, _normalize(name) + "/")
            body, ctype, _ = _get(page, timeout, accept=f"{JSON_TYPE}, text/html;q=0.1", context=context)
            chosen = pick(parse_page(body, ctype, page), name, version, tags)
            size = chosen.size if chosen else None
            if chosen is not None and size is None and urllib.parse.urlparse(chosen.url).scheme in ("http", "https"):
                size = _get(chosen.url, timeout, method="HEAD", context=context)[2]
        except urllib.error.HTTPError:
            size = None  # this project's page or file: the next pin may still be found
        except OSError:
            size, reachable = None, False
        except ValueError:
            size = None
        if size is None:
            sizes.unknown.append(pin)
        else:
            sizes.download += size
            sizes.counted.append(pin)
    return sizes
