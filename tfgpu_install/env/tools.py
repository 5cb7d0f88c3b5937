"""The tools that act on an env: uv and conda found, the environment a child tool runs with (CA
stores, no activated env), and a failed tool's output in one line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.env.target import CONDA_TOOLS
from tfgpu_install.errors import EnvironmentProblem

# --- finding tools -------------------------------------------------------------------------


def find_uv(ctx: Context) -> Optional[str]:
    """uv on PATH, else the binary shipped in the `uv` PyPI package (a dependency of this
    tool). TFGPU_NO_UV=1 forces the stdlib venv / pip path (tests, and users who want pip)."""
    if ctx.env("TFGPU_NO_UV"):
        return None
    found = ctx.runner.which("uv")
    if found:
        return found
    try:
        import uv

        path = uv.find_uv_bin()
    except (ImportError, FileNotFoundError, AttributeError):
        return None
    return str(path) if path and os.access(str(path), os.X_OK) else None


def find_conda(ctx: Context) -> Optional[str]:
    """mamba, conda or micromamba on PATH (that order: mamba solves fastest), else the
    CONDA_EXE / MAMBA_EXE that an initialised shell exports."""
    for tool in CONDA_TOOLS:
        found = ctx.runner.which(tool)
        if found:
            return found
    for var in ("CONDA_EXE", "MAMBA_EXE"):
        exe = ctx.env(var)
        if exe and os.access(exe, os.X_OK):
            return exe
    return None


def conda_named_env_path(ctx: Context, name: str, tool: Optional[str] = None) -> Path:
    """Where `<tool> create -n NAME` puts the env: the first of `info --json`'s envs_dirs."""
    exe = tool or find_conda(ctx)
    if exe is None:
        raise EnvironmentProblem(
            "--backend conda needs conda, mamba or micromamba, and none was found",
            hint="install miniforge (https://github.com/conda-forge/miniforge) or use --backend venv",
            ref="conda-missing",
        )
    res = ctx.runner.run([exe, "info", "--json"], desc="conda info", timeout=60)
    try:
        info = json.loads(res.stdout) if res.ok else {}
        envs_dirs = info.get("envs_dirs") or [str(Path(info["root_prefix"]) / "envs")]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EnvironmentProblem(
            f"could not learn where {Path(exe).name} keeps named envs ({exe} info --json failed)",
            hint="pass --env PATH instead of --name",
            ref="conda-info",
        ) from None
    return Path(envs_dirs[0]) / name


def tool_env(ctx: Context) -> dict[str, str]:
    """The variables a child tool gets: the context's environment (proxies, index URLs,
    HOME for uv's cache), minus an activated env that would redirect pip/uv."""
    env = {k: v for k, v in ctx.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME")}
    # A user behind a TLS-intercepting proxy often configures pip's CA bundle only; uv reads
    # SSL_CERT_FILE, so hand it the same bundle rather than fail on certificate checks.
    if not env.get("SSL_CERT_FILE"):
        bundle = env.get("PIP_CERT") or env.get("REQUESTS_CA_BUNDLE")
        if bundle:
            env["SSL_CERT_FILE"] = bundle
    # uv trusts only its own bundled roots unless told otherwise, while a proxy that inspects TLS
    # has its CA in the distribution's store (what curl, Python's ssl and a pip.conf `cert` use):
    # with nothing else chosen, uv uses that store when the machine has one (UV_SYSTEM_CERTS,
    # and UV_NATIVE_TLS, its older name; a minimal image without ca-certificates keeps uv's roots).
    chosen = ("SSL_CERT_FILE", "SSL_CERT_DIR", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS")
    if not any(env.get(k) for k in chosen) and any(_nonempty(ctx.sys_path(p)) for p in SYSTEM_CA_STORES):
        env["UV_SYSTEM_CERTS"] = env["UV_NATIVE_TLS"] = "1"
    return env


# Where Linux distributions keep their CA bundle (Debian/Ubuntu, Fedora/RHEL, openSUSE, Alpine/Arch).
SYSTEM_CA_STORES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                    "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem")


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


# The lines of a uv/pip/conda failure that say why (uv: "error: ..." then "cause:"/"Caused by:" down
# to the root cause and its "hint:", or its tree "×"/"╰─▶"; pip: "ERROR: ..."): kept whole rather
# than only the last lines.
_WHY = re.compile(r"^\s*(error|caused by|cause|hint|help)\b|^\s*(×|╰─▶|├─▶)", re.IGNORECASE)


def last_lines(text: str, n: int = 5) -> str:
    """A failed tool's output in one line: the lines that say why (each error and every "Caused by"),
    else the last n lines."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    why = [ln for ln in lines if _WHY.search(ln)]
    if why:
        return " / ".join(why[:12])
    return " / ".join(lines[-n:]) if lines else "(no output)"
