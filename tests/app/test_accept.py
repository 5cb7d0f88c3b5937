"""`accept`: a `pip install` the user chose becomes the env's new known-good, for real (#43 item 6).

A venv provisioned by the real install command from the local wheelhouse, then changed the way a user
changes it (`pip install six` with the env's own pip, from the same index): `check` exits 11 and names
`accept`; `accept` runs the whole verification on the env as it is and records a new known-good
snapshot (the old one kept); `check` then exits 0 and a re-run of the same install is a no-op. The
attacks: a change that breaks TensorFlow (a numpy that cannot be imported) is refused with exit 9 and
nothing recorded; a damaged file (bytes that no longer match their RECORD) is refused with exit 11,
before any verification."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.install_kit import computing_wheelhouse
from tests.support.restore_kit import Provisioned, base_environ, cli, needs_gcc
from tests.support.wheelhouse import WheelSpec, build_wheel
from tfgpu_install.cli import main
from tfgpu_install.context import build_context
from tfgpu_install.errors import ExitCode
from tfgpu_install.snapshot import model as S

pytestmark = needs_gcc

SIX = WheelSpec("six", "1.17.0", {"six.py": b'__version__ = "1.17.0"\n'})
# What a careless `pip install` can do: an older numpy (within TF's range) TensorFlow cannot import.
BROKEN_NUMPY = WheelSpec("numpy", "1.24.0", {"numpy/__init__.py": b'raise ImportError("numpy 1.24.0: broken build")\n'})


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh: Any = computing_wheelhouse(tmp_path_factory.mktemp("wheelhouse-accept"), extra_specs=[SIX])
    # numpy's page holds the real numpy wheel alone: the broken one is listed beside it
    broken = build_wheel(BROKEN_NUMPY, wh.root / "files")
    page = wh.root / "simple" / "numpy" / "index.html"
    digest = hashlib.sha256(broken.read_bytes()).hexdigest()
    page.write_text(page.read_text().replace(
        "</body>", f'<a href="../../files/{broken.name}#sha256={digest}">{broken.name}</a>\n</body>'))
    with wh.serve() as srv:
        yield srv


def _provision(tmp: Path, index_url: str, name: str) -> Provisioned:
    environ = base_environ(tmp, index_url)
    env = tmp / "data" / name
    code = main(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env),
                 "--json"], environ=environ)
    assert code == 0, f"install failed with exit {code}"
    return Provisioned(env, environ, index_url, tmp)


def _pip_install(p: Provisioned, req: str) -> None:
    """What the user does (the issue's own words: `pip install six`): the env's own pip, from the index."""
    subprocess.run([str(p.env / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--index-url",
                    p.index_url, req], check=True, capture_output=True, text=True, timeout=600,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(p.tmp)})


def _known_good(p: Provisioned) -> S.Snapshot:
    found = S.latest_for_env(build_context(p.environ).state_dir, p.env)
    assert found is not None
    return found[1]


def test_pip_install_six_then_accept_then_check_is_clean(
    tmp_path: Path, index: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _provision(tmp_path, index.url, "tf")
    first = _known_good(p)
    _pip_install(p, "six==1.17.0")
    code, doc = cli(["check", "--env", str(p.env)], p.environ, capsys)
    assert code == ExitCode.DRIFT and doc["packages_added"] == ["six==1.17.0"], doc
    assert doc["accept"].endswith(f"accept --env {p.env}")

    code, doc = cli(["accept", "--env", str(p.env)], p.environ, capsys)
    assert code == 0, doc
    assert doc["accepted"] is True and doc["previous"] == first.id and doc["snapshot"] != first.id
    assert doc["accepted_changes"] == ["package added: six==1.17.0"]
    assert doc["verification"]["ok"] is True and doc["gpu_verified"] is False  # CPU only: said so
    new = _known_good(p)
    assert new.id == doc["snapshot"] and "six" in new.package_map()
    ids = [s.id for _, s in S.scan(build_context(p.environ).state_dir).snapshots]
    assert first.id in ids  # the old known-good is kept in the history

    code, doc = cli(["check", "--env", str(p.env)], p.environ, capsys)
    assert code == 0 and doc["clean"] is True and doc["snapshot"] == new.id, doc

    # Nothing changed since: verified again, nothing new recorded.
    code, doc = cli(["accept", "--env", str(p.env)], p.environ, capsys)
    assert code == 0 and doc["unchanged"] is True and doc["snapshot"] == new.id, doc
    # The same install again is a no-op: the accepted record is the env's record for this state.
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(p.env)],
                    p.environ, capsys)
    assert code == 0 and doc["changed"] is False, doc
    assert _known_good(p).id == new.id


def test_a_change_that_breaks_tensorflow_is_not_accepted(
    tmp_path: Path, index: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _provision(tmp_path, index.url, "tf")
    first = _known_good(p)
    _pip_install(p, "numpy==1.24.0")
    code, doc = cli(["accept", "--env", str(p.env)], p.environ, capsys)
    assert code == ExitCode.VERIFY_FAILED, doc
    assert doc["accepted"] is False and doc["snapshot"] == first.id
    assert _known_good(p).id == first.id  # nothing recorded
    code, doc = cli(["check", "--env", str(p.env)], p.environ, capsys)
    assert code == ExitCode.DRIFT and doc["packages_changed"] == ["numpy: 1.26.4 -> 1.24.0"], doc


def test_damage_is_not_accepted(tmp_path: Path, index: Any, capsys: pytest.CaptureFixture[str]) -> None:
    p = _provision(tmp_path, index.url, "tf")
    first = _known_good(p)
    (init,) = p.env.glob("lib/python3*/site-packages/tensorflow/__init__.py")
    init.write_text(init.read_text() + "# edited in place\n")  # its RECORD no longer matches
    code, doc = cli(["accept", "--env", str(p.env)], p.environ, capsys)
    assert code == ExitCode.DRIFT and doc["error"] == "accept-damaged", doc
    assert "tensorflow" in doc["message"]
    assert _known_good(p).id == first.id
