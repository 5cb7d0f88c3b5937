"""The host: distribution, kernel, architecture, glibc, WSL2, container, sudo.

Files are read through ctx.sys_path so a test can plant a whole root.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.facts import identity
from tfgpu_install.facts.identity import (  # noqa: F401  (re-exported: the parsers' old home)
    container_from,
    parse_device_tree_model,
    parse_nv_tegra_release,
)
from tfgpu_install.facts.model import Host, Problem


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value lines of /etc/os-release (values optionally quoted). Never raises."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key.strip()] = value.replace('\\"', '"')
    return out


def parse_ldd_version(text: str) -> Optional[str]:
    """glibc version from `ldd --version` ("ldd (Debian GLIBC 2.36-9+deb12u4) 2.36")."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "musl" in text.lower():
        return None
    m = re.search(r"(\d+\.\d+)\s*$", first)
    return m.group(1) if m else None


def parse_confstr_glibc(value: Optional[str]) -> Optional[str]:
    """os.confstr('CS_GNU_LIBC_VERSION') -> "2.36" ("glibc 2.36")."""
    if not value:
        return None
    m = re.match(r"glibc (\d+\.\d+)", value)
    return m.group(1) if m else None


def gather_tegra(ctx: Context) -> tuple[Optional[str], Optional[str]]:
    """(what, source) for an NVIDIA Jetson (Tegra SoC): facts.identity.tegra."""
    return identity.tegra(ctx)


def _read(ctx: Context, path: str) -> Optional[str]:
    try:
        return ctx.sys_path(path).read_text(errors="replace")
    except OSError:
        return None


def gather_host(ctx: Context, runner_glibc: bool = True) -> tuple[Host, list[Problem]]:
    problems: list[Problem] = []
    osr_text = _read(ctx, "/etc/os-release") or _read(ctx, "/usr/lib/os-release")
    osr = parse_os_release(osr_text or "")
    if not osr:
        problems.append(Problem("host.os", "no /etc/os-release: distribution unknown"))
    os_name = osr.get("PRETTY_NAME") or (" ".join(filter(None, [osr.get("NAME"), osr.get("VERSION_ID")])) or None)

    kernel = (_read(ctx, "/proc/sys/kernel/osrelease") or "").strip() or os.uname().release or None
    wsl = identity.is_wsl(ctx)

    glibc: Optional[str] = None
    glibc_source: Optional[str] = None
    try:
        glibc = parse_confstr_glibc(os.confstr("CS_GNU_LIBC_VERSION"))
        glibc_source = "confstr" if glibc else None
    except (ValueError, OSError, AttributeError):
        glibc = None
    if glibc is None and runner_glibc and ctx.runner.which("ldd"):
        done = ctx.runner.run(["ldd", "--version"], desc="glibc version", timeout=5)
        glibc = parse_ldd_version(done.stdout or done.stderr)
        glibc_source = "ldd --version" if glibc else None
    if glibc is None:
        problems.append(Problem("host.glibc", "glibc version unknown (musl libc, or ldd missing)", "warning"))

    container = identity.container(ctx)
    sudo_user = ctx.environ.get("SUDO_USER") or None
    if sudo_user:
        problems.append(
            Problem(
                "host.sudo",
                f"running under sudo (SUDO_USER={sudo_user}): sudo drops LD_LIBRARY_PATH, so CUDA libraries "
                "found through it in your shell are invisible here",
                "warning",
            )
        )
    tegra, tegra_source = identity.tegra(ctx)
    host = Host(
        os=os_name,
        arch=os.uname().machine or "unknown",
        glibc=glibc,
        wsl=wsl,
        container=container,
        sudo=bool(sudo_user),
        kernel=kernel,
        sudo_user=sudo_user,
        os_id=osr.get("ID"),
        source="/etc/os-release" if osr else "none",
        glibc_source=glibc_source,
        tegra=tegra,
        tegra_source=tegra_source,
    )
    return host, problems
