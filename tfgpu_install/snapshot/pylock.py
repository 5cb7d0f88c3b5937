"""Hash-pinned locks for an installed package set, through `uv pip compile --format pylock.toml`.

uv resolves each `name==version` (no dependencies: the set is already complete) against
the configured index and writes a PEP 751 lock with each wheel's URL and sha256. We read
the hashes into snapshots and hand the same file to users who ask for pylock.toml.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.env.layout import canonical_name
from tfgpu_install.env.tools import find_uv
from tfgpu_install.errors import DownloadError, TfgpuError
from tfgpu_install.snapshot.model import Package
from tfgpu_install.snapshot.pins import pin


@dataclass(frozen=True)
class Lock:
    text: str  # the pylock.toml as uv wrote it
    packages: dict[str, dict[str, Any]]  # canonical name -> the [[packages]] table (TOML edge: uv's own file)


def parse_pylock(text: str) -> dict[str, dict[str, Any]]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.9/3.10 only
        import tomli as tomllib
    data = tomllib.loads(text)
    return {canonical_name(p["name"]): p for p in data.get("packages", [])}


def wheel_hashes(entry: Mapping[str, Any]) -> tuple[str, ...]:
    hashes = []
    for wheel in entry.get("wheels", []) or []:
        for algo, digest in (wheel.get("hashes") or {}).items():
            hashes.append(f"{algo}:{digest}")
    sdist = entry.get("sdist")
    if sdist:
        for algo, digest in (sdist.get("hashes") or {}).items():
            hashes.append(f"{algo}:{digest}")
    return tuple(hashes)


def python_platform(glibc: Optional[str], arch: Optional[str]) -> str:
    """uv's --python-platform for the snapshot's host: the wheels that host would install
    (uv knows manylinux_2_17, _2_28 and _2_31 .. _2_40: the newest not above the host's glibc)."""
    import re

    m = re.match(r"2\.(\d+)", glibc or "")
    have = int(m.group(1)) if m else 28
    minor = max([v for v in (17, 28, *range(31, 41)) if v <= have] or [17])
    return f"{arch if arch in ('x86_64', 'aarch64') else 'x86_64'}-manylinux_2_{minor}"


def compile_lock(
    ctx: Context,
    packages: Sequence[Package],
    python_version: str,
    *,
    index_url: Optional[str] = None,
    find_links: Optional[str] = None,
    timeout: float = 600,
    glibc: Optional[str] = None,
    arch: Optional[str] = None,
    offline: bool = False,
) -> Lock:
    """offline: only the index pages uv has cached (uv --offline): no request leaves the machine."""
    uv = find_uv(ctx)
    if uv is None:
        raise TfgpuError(
            "uv is needed to look up the hashes of the installed packages and was not found",
            "reinstall tfgpu-install (it depends on the `uv` package) or put uv on PATH (and unset TFGPU_NO_UV)",
            ref="uv-missing",
        )
    py = ".".join(python_version.split(".")[:2])
    with tempfile.TemporaryDirectory(prefix="tfgpu-lock-") as tmp:
        req = os.path.join(tmp, "requirements.in")
        with open(req, "w") as fh:
            fh.write("".join(f"{pin(p)}\n" for p in packages))  # checked pins only (snapshot/pins.py)
        out = os.path.join(tmp, "pylock.toml")
        argv = [uv, "pip", "compile", req, "--no-deps", "--format", "pylock.toml", "-o", out, "-q",
                "--python-version", py, "--python-platform", python_platform(glibc, arch), "--no-header"]
        from tfgpu_install.steps.packages import index_flags

        # The same index settings as the install itself; a find-links dir means offline.
        argv += index_flags(ctx, "uv", index_url, find_links=[find_links] if find_links else (),
                            no_index=bool(find_links))
        if offline:
            argv.append("--offline")
        from tfgpu_install.env.tools import last_lines, tool_env

        # the install's network settings too: certificates (SSL_CERT_FILE from PIP_CERT, the system
        # store), proxies, without an activated env's redirection
        done = ctx.runner.run(argv, desc="look up package hashes", env=tool_env(ctx), timeout=timeout)
        if not done.ok:
            raise DownloadError(
                "could not look up the installed packages' hashes on the package index: "
                + last_lines(done.stderr or done.stdout),
                "check the index (--index-url, PIP_INDEX_URL/UV_INDEX_URL) is reachable, "
                "or use --no-hashes",
                ref="lock-failed",
            )
        with open(out) as fh:
            text = fh.read()
    return Lock(text, parse_pylock(text))


def with_hashes(packages: Sequence[Package], lock: Lock) -> tuple[Package, ...]:
    out = []
    for p in packages:
        entry = lock.packages.get(p.key)
        out.append(Package(p.name, p.version, wheel_hashes(entry) if entry else p.hashes, p.content))
    return tuple(out)
