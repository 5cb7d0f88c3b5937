"""One TLS trust for every HTTP client of the tool (requests sessions, urllib): the system's certificate
store, plus the files a user names with SSL_CERT_FILE / SSL_CERT_DIR / REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE.

Why: behind a TLS-inspecting proxy whose CA is installed in the system store, uv (which trusts that
store) installed fine while `knowledge update` failed with SSLError: requests verifies against certifi's
bundle alone. The system store is what OpenSSL was built to read (its default CA file and directory,
where Debian/Ubuntu/Fedora keep the distribution's bundle and the admin's additions), or the OS verifier
through truststore where it is installed. A named file adds to the store, never replaces it.
Settings come from the Context's environment, not os.environ (tests point the tool at a temp store).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Mapping

# Where distributions keep the system bundle, for an OpenSSL built with another default (a venv's
# Python from python.org or conda ships its own OpenSSL whose default paths may point nowhere).
PLATFORM_FILES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Arch, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # RHEL 7+
)
PLATFORM_DIRS = ("/etc/ssl/certs",)
NAMED_FILES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def ssl_context(environ: Mapping[str, str]) -> ssl.SSLContext:
    """A client context that verifies against the system store and the named files (hostnames checked)."""
    ctx = _system_context()
    paths = ssl.get_default_verify_paths()
    for cafile in (paths.openssl_cafile, *PLATFORM_FILES):
        _load(ctx, cafile=cafile)
    for capath in (paths.openssl_capath, *PLATFORM_DIRS):
        _load(ctx, capath=capath)
    for name in NAMED_FILES:
        if environ.get(name):
            _load(ctx, cafile=environ[name])
    if environ.get("SSL_CERT_DIR"):
        for capath in environ["SSL_CERT_DIR"].split(":"):
            _load(ctx, capath=capath)
    return ctx


def _system_context() -> ssl.SSLContext:
    try:  # the OS verifier, where the user installed truststore (optional)
        import truststore  # type: ignore[import-not-found, unused-ignore]

        ctx: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        return ctx
    except ImportError:
        return ssl.create_default_context()


def _load(ctx: ssl.SSLContext, cafile: str = "", capath: str = "") -> None:
    """Add a CA file or hashed directory when it exists and parses; a missing or broken one is skipped
    (the system store alone may still verify the server; a failure then says which host)."""
    where = cafile or capath
    if not where or not Path(where).exists():
        return
    try:
        ctx.load_verify_locations(cafile=cafile or None, capath=capath or None)
    except (ssl.SSLError, OSError, ValueError, NotImplementedError):
        return


def mount(session: Any, environ: Mapping[str, str], adapter_kwargs: Mapping[str, Any]) -> None:
    """Mount adapters on a requests session that verify with `ssl_context(environ)` (direct and through a
    proxy's CONNECT tunnel alike)."""
    from requests.adapters import HTTPAdapter

    context = ssl_context(environ)

    class TrustAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["ssl_context"] = context
            super().init_poolmanager(*args, **kwargs)

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
            kwargs["ssl_context"] = context
            return super().proxy_manager_for(proxy, **kwargs)

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]
            if verify is True:  # the context holds the trust; certifi's bundle would only be added to it
                conn.ca_certs = None
                conn.ca_cert_dir = None

    adapter = TrustAdapter(**adapter_kwargs)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
