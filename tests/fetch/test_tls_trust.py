"""One TLS trust for every HTTP client (issue #43 item 3), behind a loopback TLS-inspecting proxy whose CA is
only in a system-style store (a hashed certificate directory, SSL_CERT_DIR): `knowledge update` works, as
uv's installs did; requests' own certifi bundle alone refused it with SSLError."""

from __future__ import annotations

import json
import ssl
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests.commands.test_knowledge_command import Index
from tests.support.httpserver import LoopbackServer, self_signed_cert
from tests.support.tls_proxy import InspectingProxy, make_ca
from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.fetch.trust import ssl_context


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_ca(tmp_path_factory.mktemp("ca"))


def update(capsys: Any, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    code = main(["knowledge", "update", "--index-url", "https://pypi.test/simple/", "--timeout", "60", "--json"],
                environ=env)
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("trust", ["system-store", "named-file-beside-another-bundle"])
def test_knowledge_update_through_an_inspecting_proxy(trust: str, ca: Any, tmp_env: dict[str, str], tmp_path: Path,
                                                      capsys: Any) -> None:
    with LoopbackServer() as origin, InspectingProxy(ca, origin.port) as proxy:
        Index(origin, tmp_path / "pwned").release("2.22.0", date.today())
        env = {**tmp_env, "HTTPS_PROXY": proxy.url}
        if trust == "system-store":
            env["SSL_CERT_DIR"] = str(ca.store)
        else:  # REQUESTS_CA_BUNDLE names a bundle without our CA: it adds to the trust, it never replaces it
            other, _ = self_signed_cert(tmp_path / "other")
            env.update(REQUESTS_CA_BUNDLE=str(other), SSL_CERT_FILE=str(ca.cert))
        code, doc = update(capsys, env)
    assert code == ExitCode.OK and [r["tensorflow"] for r in doc["learned"]] == ["2.22.0"], doc
    assert proxy.connects and all(c == "pypi.test:443" for c in proxy.connects)  # every read went through it


def test_without_the_ca_anywhere_the_proxy_is_refused_with_a_readable_reason(ca: Any, tmp_env: dict[str, str],
                                                                             tmp_path: Path, capsys: Any) -> None:
    with LoopbackServer() as origin, InspectingProxy(ca, origin.port) as proxy:
        Index(origin, tmp_path / "pwned").release("2.22.0", date.today())
        code, doc = update(capsys, {**tmp_env, "HTTPS_PROXY": proxy.url})
    assert code == ExitCode.DOWNLOAD and doc["status"] == "unreachable" and "SSLError" in doc["message"]


def test_the_context_verifies_hostnames_and_reads_the_platform_store(ca: Any) -> None:
    ctx = ssl_context({"SSL_CERT_DIR": str(ca.store)})
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ssl_context({}).cert_store_stats()["x509_ca"] > 0  # the machine's own store, without any variable
