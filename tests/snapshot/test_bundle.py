"""snapshot bundle -> restore --offline with the index unreachable; an altered bundle is refused
before anything is written."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    freeze,
    lib_hashes,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.snapshot_doc import make
from tfgpu_install.errors import ExitCode
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.bundle import platform_tags

pytestmark = needs_gcc


def _closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: any request is refused
    return f"http://127.0.0.1:{port}/simple"


@pytest.fixture(scope="module")
def bundled(source_env: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tfgpu_install.cli import main

    tmp = tmp_path_factory.mktemp("bundle")
    snap = tmp / "snap.yaml"
    assert main(["snapshot", "export", "--env", str(source_env.env), "-o", str(snap), "--json"],
                environ=source_env.environ) == 0
    out = tmp / "bundle"
    assert main(["snapshot", "bundle", str(snap), "-o", str(out), "--json"], environ=source_env.environ) == 0
    return snap, out


def test_bundle_holds_every_wheel_with_a_manifest(bundled: tuple[Path, Path]) -> None:
    snap_file, out = bundled
    snap = S.load(snap_file)
    manifest = json.loads((out / "manifest.json").read_text())
    wheels = [k for k in manifest["files"] if k.startswith("wheels/")]
    assert len(wheels) == len(snap.packages)
    assert {"snapshot.yaml", "requirements.txt"} <= set(manifest["files"])
    assert manifest["snapshot_id"] == snap.id and manifest["python"] == ".".join((snap.env.python or "").split(".")[:2])
    assert not [p for p in out.parent.iterdir() if ".partial-" in p.name]


def test_offline_restore_with_the_index_unreachable(
    source_env: Provisioned, bundled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap_file, out = bundled
    dead = _closed_port_url()
    environ = {**source_env.environ, "UV_INDEX_URL": dead, "PIP_INDEX_URL": dead,
               "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")}
    target = tmp_path / "restored"
    code, doc = cli(["snapshot", "restore", str(snap_file), "--offline", str(out), "--env", str(target),
                     "--allow-cpu", "-y"], environ, capsys)
    assert code == 0, doc
    assert doc["identical"] is True
    assert freeze(target) == freeze(source_env.env)
    assert lib_hashes(target) == lib_hashes(source_env.env)


def test_altered_bundle_is_refused_before_anything_is_written(
    source_env: Provisioned, bundled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = bundled
    copy = tmp_path / "bundle"
    shutil.copytree(out, copy)
    wheel = sorted((copy / "wheels").glob("absl_py-*.whl"))[0]
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    target = tmp_path / "restored"
    code, err = cli(["snapshot", "restore", str(copy), "--offline", str(copy), "--env", str(target), "-y",
                     "--allow-cpu"], source_env.environ, capsys)
    assert code == ExitCode.DOWNLOAD, err
    assert err["error"] == "bundle-corrupt" and "absl_py" in err["message"]
    assert not target.exists()


def test_bundle_needs_hashes_and_a_new_directory(
    source_env: Provisioned, bundled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unhashed = tmp_path / "unhashed.yaml"
    S.write(unhashed, make())
    code, err = cli(["snapshot", "bundle", str(unhashed), "-o", str(tmp_path / "b")], source_env.environ, capsys)
    assert code == ExitCode.BAD_INPUT and err["error"] == "snapshot-unhashed"
    snap_file, out = bundled
    code, err = cli(["snapshot", "bundle", str(snap_file), "-o", str(out)], source_env.environ, capsys)
    assert code == ExitCode.USAGE and err["error"] == "bundle-exists"
    assert not (tmp_path / "b").exists()


def test_platform_tags_follow_the_snapshot_host() -> None:
    tags = platform_tags(make())
    assert tags[:2] == ["manylinux_2_35_x86_64", "manylinux_2_34_x86_64"]
    assert {"manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_36_x86_64" not in tags
    assert platform_tags(make(host=S.HostContract()))[:2] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def test_pip_takes_a_wheel_for_an_older_glibc_with_these_tags(tmp_path: Path) -> None:
    """The real pip, offline: a manylinux_2_28 wheel for a glibc 2.36 host (pip alone would not match it
    from `--platform manylinux_2_36_x86_64`), and not a manylinux_2_38 one."""
    import subprocess
    import sys

    from tests.support.wheelhouse import WheelSpec, build_wheel

    found = tmp_path / "links"
    for name, platform in (("older", "manylinux_2_28_x86_64"), ("newer", "manylinux_2_38_x86_64")):
        build_wheel(WheelSpec(name, "1.0", {f"{name}/__init__.py": b""}, platform=platform), found)
    tags = platform_tags(make(host=S.HostContract(glibc="2.36", arch="x86_64")))
    for name, ok in (("older", True), ("newer", False)):
        argv = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-index",
                "--find-links", str(found), "--only-binary=:all:", "--python-version", "3.11", "--no-deps",
                "-d", str(tmp_path / "out"), name]
        done = subprocess.run(argv + [x for t in tags for x in ("--platform", t)], capture_output=True, text=True)
        assert (done.returncode == 0) is ok, done.stderr


def test_an_extra_wheel_the_manifest_does_not_list_is_refused(
    source_env: Provisioned, bundled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wheel dropped into wheels/ would be on the offline install's find-links: refuse the bundle."""
    _, out = bundled
    copy = tmp_path / "bundle"
    shutil.copytree(out, copy)
    donor = sorted((copy / "wheels").glob("absl_py-*.whl"))[0]
    shutil.copy(donor, copy / "wheels" / "evil_pkg-1.0-py3-none-any.whl")
    target = tmp_path / "restored"
    code, err = cli(["snapshot", "restore", str(copy), "--offline", str(copy), "--env", str(target), "-y",
                     "--allow-cpu"], source_env.environ, capsys)
    assert code == ExitCode.DOWNLOAD, err
    assert err["error"] == "bundle-corrupt" and "evil_pkg-1.0-py3-none-any.whl" in err["message"]
    assert not target.exists()


def test_an_extra_wheel_listed_in_an_edited_manifest_is_refused(
    source_env: Provisioned, bundled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest itself edited to carry a wheel the snapshot does not list: still refused."""
    from tfgpu_install.files import sha256_file

    _, out = bundled
    copy = tmp_path / "bundle"
    shutil.copytree(out, copy)
    donor = sorted((copy / "wheels").glob("absl_py-*.whl"))[0]
    extra = copy / "wheels" / "evil_pkg-1.0-py3-none-any.whl"
    shutil.copy(donor, extra)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["wheels/" + extra.name] = sha256_file(extra)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    target = tmp_path / "restored"
    code, err = cli(["snapshot", "restore", str(copy), "--offline", str(copy), "--env", str(target), "-y",
                     "--allow-cpu"], source_env.environ, capsys)
    assert code == ExitCode.DOWNLOAD, err
    assert err["error"] == "bundle-incomplete" and "evil_pkg" in err["message"]
    assert not target.exists()
