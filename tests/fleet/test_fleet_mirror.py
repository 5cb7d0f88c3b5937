"""The fleet's pull-through index (--serve-index): real pip clients on loopback against a real
upstream index; each file is fetched upstream once however many nodes ask, hashes are checked,
and only files its own pages named are served."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator
from urllib.parse import urljoin

import pytest

from tests.fleet.index_client import plain, urlopen
from tests.support.wheelhouse import IndexServer, WheelSpec, build_wheel, write_simple_index
from tfgpu_install.errors import UsageError
from tfgpu_install.fleet.mirror import FleetMirror, rewrite_page


@pytest.fixture()
def upstream(tmp_path: Path) -> Iterator[IndexServer]:
    wheels = [build_wheel(WheelSpec("alpha", "1.0", {"alpha/__init__.py": b"x = 1\n" + b"#" * 200_000},
                                    requires=("beta",)), tmp_path / "w"),
              build_wheel(WheelSpec("beta", "2.0", {"beta/__init__.py": b"y = 2\n"}), tmp_path / "w")]
    root = write_simple_index(tmp_path / "index", wheels)
    with IndexServer(root) as srv:  # type: ignore[attr-defined]
        yield srv


@pytest.fixture()
def mirror(upstream: IndexServer, tmp_path: Path) -> Iterator[tuple[FleetMirror, str]]:
    m = FleetMirror(upstream.url, tmp_path / "cache", "127.0.0.1")
    url = m.start()
    try:
        yield m, url
    finally:
        m.stop()


def _pip_download(index: str, dest: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                           "--no-cache-dir", "--index-url", index, "alpha", "-d", str(dest)],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]


def test_many_nodes_one_upstream_download(mirror: tuple[FleetMirror, str], upstream: IndexServer,
                                          tmp_path: Path) -> None:
    m, url = mirror
    alone = tmp_path / "alone"
    _pip_download(url, alone)  # one node: alpha and its dependency beta
    one_node = m.stats.upstream_bytes
    got = sorted(p.name for p in alone.iterdir())
    assert got[0].startswith("alpha-1.0") and got[1].startswith("beta-2.0")
    # Four more nodes at once: nothing more comes from upstream.
    threads = [threading.Thread(target=_pip_download, args=(url, tmp_path / f"node{i}")) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert sorted(p.name for p in (tmp_path / f"node{i}").iterdir()) == got
    assert m.stats.upstream_bytes == one_node
    wheel_bytes = sum(p.stat().st_size for p in alone.iterdir())
    assert m.stats.served_bytes >= 5 * wheel_bytes
    files_fetched = [r for r in upstream.requests if r.startswith("/files/")]
    assert sorted(files_fetched) == sorted(set(files_fetched)) and len(files_fetched) == 2


def test_uv_installs_through_it(mirror: tuple[FleetMirror, str], tmp_path: Path) -> None:
    """uv asks HEAD, then reads a wheel's metadata with `Range: bytes=-N` on the same kept-alive connection:
    a HEAD's no-body flag that outlived its request left uv waiting forever for the next GET's body."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.is_file():
        pytest.skip("uv is not in the test venv")
    m, url = mirror
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(uv), "pip", "install", "--no-cache", "--python", str(venv / "bin" / "python"),
                           "--index-url", url, "alpha"], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "+ alpha==1.0" in done.stderr and "+ beta==2.0" in done.stderr
    assert "tfgpu:" not in done.stderr.replace(plain(url), "")  # uv keeps the credentials out of its output


def test_only_files_its_pages_named_are_served(mirror: tuple[FleetMirror, str]) -> None:
    m, url = mirror
    base = url.rsplit("/simple/", 1)[0]  # with this run's credentials
    for path in ("/files/" + "0" * 32 + "/alpha-1.0-py3-none-any.whl", "/files/../../etc/passwd",
                 "/simple/..%2F..%2Fetc/", "/etc/passwd"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urlopen(base + path, timeout=30)
        assert err.value.code == 404, path
    assert m.stats.upstream_bytes == 0


def _fetch(url: str) -> tuple[int, bytes, bool]:
    """(status, body, complete): a body cut short (the connection closed before Content-Length) is not complete."""
    import http.client

    try:
        with urlopen(url, timeout=30) as r:
            try:
                return r.status, r.read(), True
            except http.client.IncompleteRead as cut:
                return r.status, cut.partial, False
    except urllib.error.HTTPError as err:
        return err.code, err.read(), True


def test_bytes_that_do_not_match_the_pages_hash_are_never_served(upstream: IndexServer, tmp_path: Path) -> None:
    """The file streams to its first clients while it is fetched (#42), so a bad file cannot be a 502 for
    them: they get it cut short (the last byte is held back until the hash is checked), never complete;
    later clients get the 502 with the reason; nothing is cached, not even the .part (was: 502 for all)."""
    wheel = next((upstream.root / "files").glob("beta-*.whl"))
    m = FleetMirror(upstream.url, tmp_path / "cache", "127.0.0.1")
    url = m.start()
    try:
        page = urlopen(url + "beta/", timeout=30).read().decode()
        good = wheel.read_bytes()
        wheel.write_bytes(good + b"tampered")  # upstream now serves other bytes
        href = page.split('href="', 1)[1].split('"', 1)[0].split("#", 1)[0]
        for _ in range(3):
            code, body, complete = _fetch(urljoin(url, href))
            assert (code == 200 and not complete and len(body) < len(good) + 8) or (
                code == 502 and b"sha256" in body), (code, len(body), complete)
        assert not any((tmp_path / "cache").iterdir())  # nothing kept, not even its .part
        wheel.write_bytes(good)  # a sane control: the right bytes are served whole and cached
        assert _fetch(urljoin(url, href)) == (200, good, True)
        assert [p.name for p in (tmp_path / "cache").iterdir()] == [href.split("/")[-2]]
    finally:
        m.stop()


def test_rewrite_keeps_the_hash_drops_metadata_and_foreign_schemes() -> None:
    links: dict = {}
    sha = hashlib.sha256(b"x").hexdigest()
    page = (f'<a href="../../files/a-1.0-py3-none-any.whl#sha256={sha}" data-dist-info-metadata="sha256={sha}" '
            'data-requires-python="&gt;=3.8">a</a><a href="file:///etc/passwd">p</a>')
    out = rewrite_page(page, "http://up.example/simple/a/", links)
    (token, link), = links.items()
    assert link.url == "http://up.example/files/a-1.0-py3-none-any.whl" and link.sha256 == sha
    assert f'href="/files/{token}/a-1.0-py3-none-any.whl#sha256={sha}"' in out
    assert "data-dist-info-metadata" not in out and 'data-requires-python="&gt;=3.8"' in out
    assert 'href=""' in out and "file://" not in out


def test_a_non_http_upstream_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        FleetMirror("file:///srv/index", tmp_path, "127.0.0.1")


def test_head_answers_the_size_and_sends_no_body(mirror: tuple[FleetMirror, str]) -> None:
    """uv asks HEAD before it reads a wheel."""
    m, url = mirror
    page = urlopen(url + "beta/", timeout=30).read().decode()
    href = page.split('href="', 1)[1].split('"', 1)[0].split("#", 1)[0]
    served = m.stats.served_bytes
    with urlopen(urljoin(url, href), method="HEAD") as r:
        assert int(r.headers["Content-Length"]) > 0 and r.read() == b""
    assert m.stats.served_bytes == served
