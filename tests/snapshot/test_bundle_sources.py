"""One download per wheel per machine (issue #44 item 2): `snapshot bundle` and `snapshot image`
take the wheels they can prove from what is here (uv's cache, the tool's wheel store, a bundle
given with `image --bundle`) and fetch only the rest.

Real pieces: the env is provisioned by the real install (real uv, its cache under the test's
HOME), exported with hashes from the served index; the bundle and image commands then run in a new
network namespace (`unshare -n`: no network at all, not even loopback) where that is possible,
else with every index URL pointing at a closed port. The bundle restores offline with an empty uv
cache to the very same builds. The broken versions these catch: a bundle that always runs pip
download (fails offline), and one that takes a wheel from uv's cache on its name alone (a file
changed in the cache then reaches the bundle)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

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
from tfgpu_install.errors import ExitCode
from tfgpu_install.snapshot import bundle as B
from tfgpu_install.snapshot import model as S

pytestmark = needs_gcc


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/simple"


def _offline(environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv prefix, environment) for a command with no network: unshare -n where it works, and
    every index URL at a closed port in any case."""
    dead = _dead_url()
    env = {**environ, "UV_INDEX_URL": dead, "PIP_INDEX_URL": dead, "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}
    try:
        ok = subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    return (["unshare", "-n"] if ok else []), env


def _tool(prefix: list[str], environ: dict[str, str], *args: str) -> tuple[int, Any]:
    done = subprocess.run([*prefix, sys.executable, "-m", "tfgpu_install", *args, "--json"], env=environ,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          cwd=str(Path(__file__).resolve().parents[2]))
    try:
        return done.returncode, json.loads(done.stdout)
    except ValueError:
        return done.returncode, {"raw": done.stdout + done.stderr}


@pytest.fixture(scope="module")
def exported(source_env: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tfgpu_install.cli import main

    out = tmp_path_factory.mktemp("sources-export") / "snap.yaml"
    assert main(["snapshot", "export", "--env", str(source_env.env), "-o", str(out), "--json"],
                environ=source_env.environ) == 0
    snap = S.load(out)
    assert all(p.hashes and p.content for p in snap.packages), snap
    return out


def _uv_archives(p: Provisioned) -> list[Path]:
    """absl-py's unpacked wheels in uv's cache (the session's) that hold the source env's build."""
    root = Path(p.environ["UV_CACHE_DIR"]) / "archive-v0"
    installed = next(p.env.glob("lib/python3*/site-packages/absl/__init__.py")).read_bytes()
    found = [d for d in root.iterdir() if (d / "absl_py-2.1.0.dist-info").is_dir()
             and (d / "absl" / "__init__.py").read_bytes() == installed]
    assert found
    return found


def test_bundle_offline_from_uv_cache_restores_the_same_builds(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix, environ = _offline(source_env.environ)
    out = tmp_path / "bundle"
    code, doc = _tool(prefix, environ, "snapshot", "bundle", str(exported), "-o", str(out))
    assert code == 0, doc
    n = len(S.load(exported).packages)
    assert doc["made_from"]["fetched_bytes"] == 0 and doc["made_from"]["sources"] == {"uv-cache": n}, doc
    snap, manifest = B.verify(out)
    assert manifest["made_from"]["sources"] == {"uv-cache": n}
    # The rebuilt wheels' own sha256 rides beside the published ones in the bundle's copy.
    original = S.load(exported).package_map()
    assert all(len(p.hashes) == len(original[p.key].hashes) + 1 for p in snap.packages)
    # Offline restore, with an empty uv cache: the very builds of the source env.
    restored = tmp_path / "restored"
    environ = {**environ, "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")}
    code, doc = cli(["snapshot", "restore", str(exported), "--offline", str(out), "--env", str(restored),
                     "--allow-cpu", "-y"], environ, capsys)
    assert code == 0 and doc["identical"] is True, doc
    assert freeze(restored) == freeze(source_env.env) and lib_hashes(restored) == lib_hashes(source_env.env)
    # image --bundle: every wheel from the bundle, nothing fetched, offline.
    code, doc = _tool(prefix, {**environ}, "snapshot", "image", str(exported), "-o", str(tmp_path / "image"),
                      "--bundle", str(out))
    assert code == 0, doc
    assert doc["made_from"]["sources"] == {"bundle": n} and doc["made_from"]["fetched_bytes"] == 0, doc
    image_bundle = B.verify(tmp_path / "image" / "bundle")[1]
    assert image_bundle["files"] == {**manifest["files"], **{k: v for k, v in image_bundle["files"].items()
                                                           if not k.startswith("wheels/")}}


def test_a_changed_file_in_uv_cache_is_not_taken(
    source_env: Provisioned, exported: Path, tmp_path: Path
) -> None:
    """absl's unpacked wheel in uv's cache with one file changed (its RECORD untouched): not the
    recorded build, so not packed; offline the bundle then fails (exit 8) for that one wheel, and
    with the index it downloads that one only. Control: the untouched cache gave every wheel."""
    inits = [u / "absl" / "__init__.py" for u in _uv_archives(source_env)]
    kept = []
    for i, init in enumerate(inits):  # a new file in its place: the hard-linked envs keep theirs
        kept.append(tmp_path / f"orig-{i}")
        os.replace(init, kept[-1])
        shutil.copy2(kept[-1], init)
        init.write_bytes(init.read_bytes().replace(b"2.1.0", b"6.6.6"))
    try:
        prefix, environ = _offline(source_env.environ)
        code, doc = _tool(prefix, environ, "snapshot", "bundle", str(exported), "-o", str(tmp_path / "b1"))
        assert code == ExitCode.DOWNLOAD and doc["error"] == "bundle-download", doc
        assert not (tmp_path / "b1").exists() and not list(tmp_path.glob(".b1.partial-*"))
        code, doc = _tool([], source_env.environ, "snapshot", "bundle", str(exported), "-o", str(tmp_path / "b2"))
        assert code == 0, doc
        n = len(S.load(exported).packages)
        assert doc["made_from"]["sources"] == {"uv-cache": n - 1, "download": 1}, doc
        assert doc["made_from"]["fetched_bytes"] > 0
    finally:
        for init, orig in zip(inits, kept):
            os.replace(orig, init)


def test_a_second_bundle_takes_what_the_first_downloaded(
    source_env: Provisioned, exported: Path, tmp_path: Path
) -> None:
    """With uv's cache out of reach (another HOME), the first bundle downloads every wheel and keeps
    it in the tool's wheel store; a second one, offline, takes them all from there."""
    environ = {**source_env.environ, "UV_CACHE_DIR": str(tmp_path / "other-uv-cache"),
               "TFGPU_CACHE_DIR": str(tmp_path / "tool-cache")}
    code, doc = _tool([], environ, "snapshot", "bundle", str(exported), "-o", str(tmp_path / "first"))
    n = len(S.load(exported).packages)
    assert code == 0 and doc["made_from"]["sources"] == {"download": n}, doc
    prefix, offline = _offline(environ)
    code, doc = _tool(prefix, offline, "snapshot", "bundle", str(exported), "-o", str(tmp_path / "second"))
    assert code == 0 and doc["made_from"] == {"sources": {"store": n}, "fetched_bytes": 0, "rebuilt": []}, doc
    a, b = B.verify(tmp_path / "first")[1], B.verify(tmp_path / "second")[1]
    assert {k: v for k, v in a["files"].items() if k.startswith("wheels/")} == \
        {k: v for k, v in b["files"].items() if k.startswith("wheels/")}


def test_image_refuses_an_altered_bundle_before_building(
    source_env: Provisioned, exported: Path, tmp_path: Path
) -> None:
    environ = {**source_env.environ, "UV_CACHE_DIR": str(tmp_path / "no-uv-cache")}
    good = tmp_path / "bundle"
    assert _tool([], environ, "snapshot", "bundle", str(exported), "-o", str(good))[0] == 0
    wheel = next((good / "wheels").glob("absl_py-*.whl"))
    data = wheel.read_bytes()
    wheel.unlink()
    wheel.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    code, doc = _tool([], environ, "snapshot", "image", str(exported), "-o", str(tmp_path / "img"),
                      "--bundle", str(good))
    assert code == ExitCode.DOWNLOAD and doc["error"] == "bundle-corrupt", doc
    assert not (tmp_path / "img").exists() and not list(tmp_path.glob(".img.partial-*"))
