"""A same-version swap is drift (issue #38 item 1): another build of absl-py 2.1.0 (other code, its
own consistent RECORD), put into a real provisioned env for real, once by `uv pip install --reinstall`
and once by pip, each from a second locally built wheel of the same name and version.

The broken version these catch: a file check that compares installed files with the installed
RECORD only (which the swap rewrote): `check` exit 0 and restore "identical" over foreign code.
Controls: a clean env is clean (also after pip reinstalls the very wheel uv installed: another
installer, the same build), and a snapshot older than build records says "unknown"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.wheelhouse import WheelSpec, build_wheel
from tfgpu_install.errors import ExitCode

pytestmark = needs_gcc

SWAPPED = b'__version__ = "2.1.0"\nSWAPPED = "another build"\n'


def _sp(env: Path) -> Path:
    return sorted(env.glob("lib/python3*/site-packages"))[-1]


def _absl(env: Path) -> bytes:
    return (_sp(env) / "absl" / "__init__.py").read_bytes()


@pytest.fixture(scope="module")
def other_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """absl-py 2.1.0 again, built here with other code: a valid wheel with its own RECORD."""
    return build_wheel(WheelSpec("absl-py", "2.1.0", {"absl/__init__.py": SWAPPED}),
                       tmp_path_factory.mktemp("other-build"))


def _swap_with_uv(env: Path, wheel: Path, environ: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(env / "bin" / "python"),
                    "--reinstall", "--no-deps", "--no-index", str(wheel)], env=environ, check=True,
                   capture_output=True)


def _pip(env: Path, environ: dict[str, str], *args: str) -> None:
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                    "--no-input", "--no-deps", "--force-reinstall", *args], env=environ, check=True,
                   capture_output=True)


def _known_good(p: Provisioned) -> str:
    """The id of the source env's latest known-good snapshot."""
    docs = [yaml.safe_load(f.read_text())
            for f in (Path(p.environ["TFGPU_STATE_DIR"]) / "snapshots").glob("*known-good*.yaml")]
    return str(max((d for d in docs if str(d["env"]["path"]) == str(p.env)), key=lambda d: d["created"])["id"])


def _other_builds(doc: dict[str, Any]) -> list[str]:
    return [d["name"] for d in doc["installed_files"]["damaged"] if d["other_build"]]


def test_a_clean_env_is_clean_and_every_build_was_compared(source_env: Provisioned,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ((), ("--full",)):
        code, doc = cli(["check", "--env", str(source_env.env), *extra], source_env.environ, capsys)
        assert code == 0 and doc["clean"] is True, doc
        builds = doc["installed_files"]["builds"]
        assert builds["recorded"] is True and builds["unknown"] == [] and builds["checked"] >= 5, builds


def test_pip_reinstalling_the_same_wheel_is_no_drift(source_env: Provisioned,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Another installer, the very same build: pip's RECORD (its INSTALLER, its bytecode rows)
    differs from uv's, the build's fingerprint does not."""
    before = _absl(source_env.env)
    _pip(source_env.env, source_env.environ, "--index-url", source_env.index_url, "absl-py==2.1.0")
    assert (_sp(source_env.env) / "absl_py-2.1.0.dist-info" / "INSTALLER").read_text().strip() == "pip"
    code, doc = cli(["check", "--env", str(source_env.env)], source_env.environ, capsys)
    assert code == 0 and doc["clean"] is True, doc
    assert _absl(source_env.env) == before


def test_a_uv_swap_is_drift_and_restore_puts_the_recorded_build_back(
    source_env: Provisioned, other_build: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = source_env.env
    original = _absl(env)
    good = _known_good(source_env)
    _swap_with_uv(env, other_build, source_env.environ)
    assert _absl(env) == SWAPPED
    for extra in ((), ("--full",)):
        code, doc = cli(["check", "--env", str(env), *extra], source_env.environ, capsys)
        assert code == ExitCode.DRIFT and _other_builds(doc) == ["absl-py"], doc
    capsys.readouterr()
    from tfgpu_install.cli import main

    assert main(["check", "--env", str(env)], environ=source_env.environ) == ExitCode.DRIFT
    said = capsys.readouterr().out
    assert "absl-py 2.1.0: another build of this version" in said, said

    code, doc = cli(["snapshot", "restore", good, "--env", str(env), "--allow-cpu", "-y"], source_env.environ,
                    capsys)
    assert code == 0 and doc["identical"] is True, doc
    assert "packages.install" in [s["id"] for s in doc["steps"] if s["status"] == "applied"]
    assert _absl(env) == original
    assert cli(["check", "--env", str(env), "--full"], source_env.environ, capsys)[0] == 0


def test_a_pip_swap_is_drift_and_the_install_rerun_repairs_it(
    source_env: Provisioned, other_build: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = source_env.env
    original = _absl(env)
    _pip(env, source_env.environ, "--no-index", str(other_build))
    assert _absl(env) == SWAPPED
    code, doc = cli(["check", "--env", str(env)], source_env.environ, capsys)
    assert code == ExitCode.DRIFT and _other_builds(doc) == ["absl-py"], doc
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env)],
                    source_env.environ, capsys)
    assert code == 0, doc
    assert _absl(env) == original
    assert cli(["check", "--env", str(env)], source_env.environ, capsys)[0] == 0


def test_restore_refuses_when_it_can_only_get_another_build(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The snapshot records one build, the index serves another (here: the record names other
    bytes): the restore fails with exit 8 (other-build) and undoes itself; never "identical"."""
    good = _known_good(source_env)
    doc = yaml.safe_load(next((Path(source_env.environ["TFGPU_STATE_DIR"]) / "snapshots").glob(f"{good}.yaml"))
                         .read_text())
    for p in doc["packages"]:
        if p["name"].lower() == "absl-py":
            assert p["content"].startswith("sha256:")
            p["content"] = "sha256:" + "0" * 64
    snap = tmp_path / "other.yaml"
    snap.write_text(yaml.safe_dump(doc))
    target = tmp_path / "restored"
    code, err = cli(["snapshot", "restore", str(snap), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == ExitCode.DOWNLOAD and err["error"] == "other-build", err
    assert "absl-py 2.1.0" in err["message"]
    assert not target.exists()


def test_a_snapshot_older_than_build_records_says_unknown(
    source_env: Provisioned, other_build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without `content` (a snapshot from before it existed) nothing is called identical: restore
    says the builds are unknown (identical: null), exit 0; the record it then writes has them."""
    good = _known_good(source_env)
    doc = yaml.safe_load(next((Path(source_env.environ["TFGPU_STATE_DIR"]) / "snapshots").glob(f"{good}.yaml"))
                         .read_text())
    for p in doc["packages"]:
        p.pop("content", None)
    doc["id"] = "20200101T000000Z-export-0ld0ld"
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(doc))
    target = tmp_path / "restored"
    code, out = cli(["snapshot", "restore", str(old), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0 and out["identical"] is None and "absl-py==2.1.0" in out["builds_unknown"], out
    assert out["installed_files"]["builds"]["recorded"] is False
    from tfgpu_install.cli import main

    capsys.readouterr()
    assert main(["snapshot", "restore", str(old), "--env", str(target), "--allow-cpu", "-y"],
                environ=source_env.environ) == 0
    said = capsys.readouterr().out
    assert "identical" not in said and "unknown" in said, said
    # The restore's own known-good record has the builds: a swap is seen from now on.
    _swap_with_uv(target, other_build, source_env.environ)
    code, doc = cli(["check", "--env", str(target)], source_env.environ, capsys)
    assert code == ExitCode.DRIFT and _other_builds(doc) == ["absl-py"], doc


def test_snapshot_diff_names_another_build(source_env: Provisioned, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    good = _known_good(source_env)
    path = next((Path(source_env.environ["TFGPU_STATE_DIR"]) / "snapshots").glob(f"{good}.yaml"))
    doc = yaml.safe_load(path.read_text())
    for p in doc["packages"]:
        if p["name"].lower() == "absl-py":
            p["content"] = "sha256:" + "1" * 64
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**doc, "id": "20200101T000000Z-export-0the20"}))
    code, out = cli(["snapshot", "diff", str(path), str(other)], source_env.environ, capsys)
    assert code == ExitCode.DRIFT and out["packages_changed"] == ["absl-py 2.1.0: another build (other files "
                                                                   "than recorded)"], out
    assert cli(["snapshot", "diff", str(path), str(path)], source_env.environ, capsys)[0] == 0


def test_a_known_good_restore_checks_wheels_by_the_index_hashes_uv_cached(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A known-good snapshot records no wheel hashes (the test knowledge pins none): restore takes
    them from the index pages uv has cached (no request), uv checks the wheels against them, and the
    closing check does not read again what was written from them (issue #44 item 1). Control: with
    uv's cache elsewhere nothing is cached, nothing is trusted, every file is read; both identical."""
    good = _known_good(source_env)
    code, doc = cli(["snapshot", "restore", good, "--env", str(tmp_path / "a"), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    files = doc["installed_files"]
    assert code == 0 and doc["identical"] is True, doc
    assert any("pages uv has cached" in w for w in doc["warnings"]), doc["warnings"]
    assert files["read_files"] < files["hashed"] / 2, files
    environ = {**source_env.environ, "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")}
    code, doc = cli(["snapshot", "restore", good, "--env", str(tmp_path / "b"), "--allow-cpu", "-y"], environ,
                    capsys)
    files = doc["installed_files"]
    assert code == 0 and doc["identical"] is True, doc
    assert not any("pages uv has cached" in w for w in doc["warnings"])
    assert files["read_files"] == files["hashed"] > 0, files
