"""`snapshot export`'s hash look-up (uv pip compile) gets the install's network settings: a CA given
the way pip users give it (PIP_CERT) reaches uv over real TLS on loopback; without it the error keeps
the lines that say why (the certificate), not only uv's last line."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.support.httpserver import LoopbackServer
from tests.support.promised import needs_tool
from tests.support.wheelhouse import WheelSpec, build_wheel
from tfgpu_install.context import build_context
from tfgpu_install.errors import DownloadError
from tfgpu_install.snapshot.model import Package
from tfgpu_install.snapshot.pylock import compile_lock

pytestmark = needs_tool("openssl", "it makes the loopback CA")


def _ca_and_server_cert(d: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) made by the real openssl: a CA that signed
    a leaf for 127.0.0.1, as a TLS-inspecting proxy's CA does (uv refuses a self-signed leaf)."""
    d.mkdir(parents=True)
    ca, ca_key, leaf, key, csr = (d / n for n in ("ca.pem", "ca.key", "leaf.pem", "leaf.key", "leaf.csr"))
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    for argv in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
         "-subj", "/CN=tfgpu test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(leaf),
         "-days", "2", "-extfile", str(ext)],
    ):
        subprocess.run(["openssl", *argv], check=True, capture_output=True)
    return ca, leaf, key


def _https_index(srv: LoopbackServer, wheel: Path) -> str:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    srv.add(f"/files/{wheel.name}", wheel.read_bytes())
    srv.add("/simple/tiny-pkg/", (f'<html><body><a href="/files/{wheel.name}#sha256={digest}">{wheel.name}</a>'
                                  "</body></html>").encode(), content_type="text/html")
    return digest


def test_the_hash_lookup_gets_the_certificate_setting(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    wheel = build_wheel(WheelSpec("tiny-pkg", "1.0", files={"tiny_pkg/__init__.py": b""}), tmp_path / "w")
    ca, cert, key = _ca_and_server_cert(tmp_path / "tls")
    with LoopbackServer(tls=(cert, key)) as srv:
        digest = _https_index(srv, wheel)
        env = {**tmp_env, "UV_INDEX_URL": srv.url("/simple/"), "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
               "PIP_CERT": str(ca)}
        lock = compile_lock(build_context(env), [Package("tiny-pkg", "1.0")], "3.11", glibc="2.17", arch="x86_64")
        assert digest in lock.text and lock.packages["tiny-pkg"]

        # no CA: refused, and the message carries uv's reason (the certificate)
        del env["PIP_CERT"]
        with pytest.raises(DownloadError) as err:
            compile_lock(build_context(env), [Package("tiny-pkg", "1.0")], "3.11", glibc="2.17", arch="x86_64")
        assert "certificate" in err.value.message.lower(), err.value.message
