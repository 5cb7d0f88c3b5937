"""urllib against the fleet's index: its URL carries this run's credentials (http://tfgpu:TOKEN@host:port/),
which urllib does not send by itself; pip and uv do (HTTP Basic auth)."""

from __future__ import annotations

import base64
import urllib.request
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit


def auth_header(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    if not parts.username:
        return {}
    token = base64.b64encode(f"{parts.username}:{parts.password or ''}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def plain(url: str) -> str:
    """The URL without its user:password@."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


def urlopen(url: str, timeout: float = 30, method: Optional[str] = None,
            headers: Optional[dict[str, str]] = None) -> Any:
    req = urllib.request.Request(plain(url), method=method, headers={**auth_header(url), **(headers or {})})
    return urllib.request.urlopen(req, timeout=timeout)
