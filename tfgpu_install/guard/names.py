"""Strict types for text that comes from files users share (snapshots, bundles, knowledge
tables): project names, versions, hashes, URLs, and text bound for a terminal.

A project name is a PEP 503/508 name and nothing else (no `name @ url` direct reference, no
extras, no marker, no option); a version is PEP 440; a hash is sha256:<64 lowercase hex>; a
URL is https (plain http only for the index or mirror the user named). printable() escapes
every control character, so no string read from a file can move the cursor, erase a line or
retitle the terminal.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

PROJECT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$")
SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")
# PEP 440 (packaging's VERSION_PATTERN), anchored, no surrounding whitespace.
_PEP440 = re.compile(
    r"^v?(?:(?:[0-9]+)!)?[0-9]+(?:\.[0-9]+)*"
    r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?"
    r"(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?"
    r"(?:[-_.]?dev[-_.]?[0-9]*)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$",
    re.IGNORECASE,
)
MAX_VERSION = 100


def is_project(name: str) -> bool:
    return bool(PROJECT.fullmatch(name))


def is_version(text: str) -> bool:
    return len(text) <= MAX_VERSION and bool(_PEP440.fullmatch(text))


def is_sha256(text: str) -> bool:
    return bool(SHA256.fullmatch(text))


def url_problem(url: str, allowed: Iterable[str] = ()) -> Optional[str]:
    """None for an https URL (or one that starts with a URL the user gave); else what is wrong."""
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return "contains whitespace or a control character"
    if any(a and url.startswith(a) for a in allowed):
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme != "https":
        return f"scheme {parts.scheme or 'none'!r}: only https is accepted here"
    if not parts.hostname:
        return "no host"
    if parts.username or parts.password:
        return "carries credentials"
    return None


def index_url_problem(url: str) -> Optional[str]:
    """The user's own --index-url/mirror: http or https with a host, nothing else (file:, ftp:,
    a bare word, a space or control character are refused before anything runs)."""
    from urllib.parse import urlsplit

    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return "contains whitespace or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number
    except ValueError as exc:
        return f"not a URL ({exc})"
    del port
    if parts.scheme not in ("http", "https"):
        return f"scheme {parts.scheme or 'none'!r}: an index URL is http:// or https://"
    if not parts.hostname:
        return "no host"
    return None


_BIDI = {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x20 or 0x7F <= code <= 0x9F or code in _BIDI:
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return ch


def printable(text: str, keep_newlines: bool = False) -> str:
    """text with control characters (C0, DEL, C1, bidi overrides) written as \\xNN; newlines
    (and tabs) kept when `keep_newlines` (a multi-line message of our own)."""
    if text.isprintable():
        return text
    keep = "\n\t" if keep_newlines else ""
    return "".join(ch if ch in keep else _escape(ch) for ch in text)
