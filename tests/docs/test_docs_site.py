"""The docs site builds with every warning an error (as CI builds it), and renders in a real browser:
headless Chromium loads the home page and a generated reference page, and draws them."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.reference_gen import REPO
from tests.support.promised import CI, needs_tool

pytestmark = pytest.mark.e2e  # builds the whole site with Sphinx and drives a real browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import sphinx  # noqa: F401
    except ImportError:
        if CI and sys.version_info >= (3, 11):
            pytest.fail("the docs extra (Sphinx) is missing: scripts/test installs it", pytrace=False)
        pytest.skip("Sphinx is not installed (the `docs` extra; Python 3.11 or newer)")
    out = tmp_path_factory.mktemp("html")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(out / ".doctrees"), str(REPO / "docs"), str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_the_site_builds_with_no_warning(site: Path) -> None:
    assert (site / "index.html").is_file() and (site / "reference" / "commands" / "install.html").is_file()
    assert (site / "_static" / "styles" / "furo.css").is_file()  # the theme is the one pinned, not a fallback


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


@needs_tool("chromium", "the site is rendered in headless Chromium (apt install chromium)",
            *([CHROMIUM] if CHROMIUM else []))
@pytest.mark.parametrize("page, words", [
    ("index.html", ["Five common questions", "Pin a TensorFlow version (such as 2.15)", "sidebar-tree",
                    "_static/styles/furo.css"]),
    ("reference/commands/install.html", ["tfgpu-install install", "--allow-cpu", "--tensorflow X.Y[.Z]"]),
])
def test_a_real_browser_renders_the_page(site: Path, page: str, words: list[str], tmp_path: Path) -> None:
    url = (site / page).as_uri()
    dom = _chromium("--dump-dom", url, profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    missing = [w for w in words if w not in dom.stdout]
    assert not missing, missing
    shot = tmp_path / "page.png"
    drawn = _chromium("--window-size=1280,1000", f"--screenshot={shot}", url, profile=tmp_path / "profile")
    assert drawn.returncode == 0 and shot.is_file(), drawn.stderr[-2000:]
    assert _png_size(shot) == (1280, 1000)
    # a page of text, tables and a sidebar: a blank page compresses to a few KB (~6 KB at this size)
    assert shot.stat().st_size > 30_000
