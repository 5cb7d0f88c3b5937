"""The suite's own clients of the real registry (uv run by a test or a fixture, not by the tool) trust
what the tool's do: the system CA store. uv trusts only its bundled roots unless told otherwise, so behind
a TLS-inspecting proxy whose CA is only in the system store (`env -i PATH=/usr/bin:/bin scripts/test`
drops SSL_CERT_FILE and the like) its fetches failed with "invalid peer certificate: UnknownIssuer"
while the tool's own installs worked (env/tools.py tool_env gives uv the system store). pip trusts
the system store by itself (truststore, pip.conf's `cert`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping, Optional

from tfgpu_install.env.tools import SYSTEM_CA_STORES

CHOSEN = ("SSL_CERT_FILE", "SSL_CERT_DIR", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS")


def trusted_env(base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """`base` (default: this process's environment) with uv told to use the system store, when nothing
    else was chosen and the machine has one."""
    env = dict(os.environ if base is None else base)
    if not any(env.get(k) for k in CHOSEN) and any(_nonempty(Path(p)) for p in SYSTEM_CA_STORES):
        env["UV_SYSTEM_CERTS"] = env["UV_NATIVE_TLS"] = "1"
    return env


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def registry_cli_env(tmp_env: Mapping[str, str], repo: Path) -> dict[str, str]:
    """The environment of a tool run against the real registry on a made-up machine (`tmp_env`'s
    TFGPU_ROOT): the user's uv cache, mirror, proxy and certificate settings kept (a rerun does not
    download again), and the made-up machine given this machine's CA store. The tool decides from the
    root it is pointed at whether uv gets the system store (env/tools.py tool_env), while uv, a real
    program, reads the real one: without the copy, `env -i PATH=/usr/bin:/bin scripts/test` behind a
    TLS-inspecting proxy failed with "invalid peer certificate: UnknownIssuer"."""
    env = dict(tmp_env, PYTHONPATH=str(repo))
    for var, value in os.environ.items():
        if var.startswith(("UV_", "PIP_", "SSL_CERT_")) or var.lower().endswith("_proxy") or var in (
            "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"
        ):
            env[var] = value
    if env.get("PIP_CERT") and not env.get("SSL_CERT_FILE"):
        env["SSL_CERT_FILE"] = env["PIP_CERT"]  # a TLS-intercepting proxy: uv needs its CA too
    env.setdefault("UV_CACHE_DIR", str(Path(os.environ.get("HOME", "/tmp")) / ".cache" / "uv"))
    root = Path(tmp_env["TFGPU_ROOT"])
    for store in SYSTEM_CA_STORES:
        if _nonempty(Path(store)):
            (root / store.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store, root / store.lstrip("/"))
    return env
