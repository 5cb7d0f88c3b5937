"""snapshot export -> restore, for real: a provisioned venv (real uv from a local index over
loopback HTTP), exported with published hashes, restored into a new path; `pip freeze --all`
and the library files' sha256 come out identical. A tampered hash is refused with nothing
left behind; rollback undoes a restore; restoring over an env with extras syncs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.faults import armed
from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    assert_restores_exactly,
    cli,
    freeze,
    lib_hashes,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.wheelhouse import WheelSpec, build_wheel
from tfgpu_install.errors import ExitCode
from tfgpu_install.snapshot import model as S

pytestmark = needs_gcc


@pytest.fixture(scope="module")
def exported(source_env: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "snap.yaml"
    from tfgpu_install.cli import main

    code = main(["snapshot", "export", "--env", str(source_env.env), "-o", str(out), "--json"],
                environ=source_env.environ)
    assert code == 0
    return out


def test_export_records_hashes_host_and_files(source_env: Provisioned, exported: Path) -> None:
    snap = S.load(exported)
    names = {p.key for p in snap.packages}
    assert {"tensorflow", "numpy", "nvidia-cudnn-cu12"} <= names
    assert all(p.hashes and p.hashes[0].startswith("sha256:") for p in snap.packages), snap.notes
    assert snap.host.driver == "535.104.05" and snap.host.glibc
    assert any(f.path.endswith("libcudnn.so.9") for f in snap.files)
    assert "bin/activate" in snap.activation and "bin/tfgpu-run" in snap.activation
    assert (snap.env.python or "").startswith("3.")


def test_restore_into_new_path_is_identical(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "restored"
    code, doc = cli(["snapshot", "restore", str(exported), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0, doc
    assert doc["identical"] is True
    applied = [s["id"] for s in doc["steps"] if s["status"] == "applied"]
    assert applied == ["env.create", "packages.install", "activation.write", "verify.run", "snapshot.record"]
    assert freeze(target) == freeze(source_env.env)
    assert lib_hashes(target) == lib_hashes(source_env.env) != {}
    # The restored env works: TF imports through its launcher.
    out = subprocess.run([str(target / "bin" / "tfgpu-run"), "python", "-c",
                          "import tensorflow; print(tensorflow.__version__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2.99.0"
    # A known-good record of the restored env, so `check` watches it from now on.
    code, doc = cli(["check", "--env", str(target)], source_env.environ, capsys)
    assert code == 0 and doc["clean"] is True

    # Rollback undoes the restore: the env is gone again.
    code, doc = cli(["rollback", "-y", "--env", str(target)], source_env.environ, capsys)
    assert code == 0, doc
    assert not target.exists()


def test_tampered_hash_is_refused_and_nothing_is_left(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(exported.read_text())
    for p in doc["packages"]:
        if p["name"].lower() == "absl-py":
            p["hashes"] = ["sha256:" + "0" * 64]
    bad = tmp_path / "tampered.yaml"
    bad.write_text(yaml.safe_dump(doc))
    target = tmp_path / "restored"
    code, err = cli(["snapshot", "restore", str(bad), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == ExitCode.DOWNLOAD, err
    assert err["error"] == "hash-mismatch"
    assert "absl" in err["message"].lower() and "undone" in err["message"]
    assert not target.exists()


def test_restore_over_existing_env_removes_extras_and_undo_puts_them_back(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "restored"
    code, doc = cli(["snapshot", "restore", str(exported), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0, doc
    first = doc["recorded"]
    # Someone adds a package built locally (no index has it) and changes another.
    extra = build_wheel(WheelSpec("extra-tool", "1.0", {"extra_tool/__init__.py": b"X = 1\n"}), tmp_path / "w")
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(target / "bin" / "python"),
                    "--index-url", source_env.index_url, str(extra), "protobuf==5.0.0"],
                   env=source_env.environ, check=True, capture_output=True)
    changed = freeze(target)
    assert any(x.startswith("extra-tool") for x in changed) and "protobuf==5.0.0" in changed
    code, doc = cli(["snapshot", "restore", str(exported), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0, doc
    assert [s["id"] for s in doc["steps"] if s["status"] == "applied"][:2] == ["packages.install", "packages.sync"]
    # What the env held before was recorded as a rollback point.
    point = S.find(Path(source_env.environ["TFGPU_STATE_DIR"]), doc["rollback_point"])[1]
    assert point.kind == "rollback-point" and "extra-tool" in point.package_map()
    assert freeze(target) == freeze(source_env.env)
    assert not list(target.glob("lib/python3*/site-packages/extra_tool"))
    # Rolling back to the first restore's known-good point undoes only the second restore.
    code, doc = cli(["rollback", "-y", "--env", str(target), "--to", first], source_env.environ, capsys)
    assert code == 0, doc
    assert freeze(target) == changed


def test_the_e2e_helper_restores_exactly_through_the_cli_subprocess(source_env: Provisioned, tmp_path: Path) -> None:
    """The same check the real-registry test runs on the real stable env (see restore_kit)."""
    assert_restores_exactly(source_env.env, source_env.environ, tmp_path / "work", timeout=600)


def test_restore_in_place_of_an_unchanged_env_changes_nothing(
    source_env: Provisioned, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = freeze(source_env.env)
    # No -y needed: there is nothing to confirm.
    code, doc = cli(["snapshot", "restore", str(exported), "--env", str(source_env.env), "--allow-cpu"],
                    source_env.environ, capsys)
    assert code == 0, doc
    assert doc["changed"] is False and doc["identical"] is True
    assert {s["status"] for s in doc["steps"]} <= {"done", "unchanged"}
    assert freeze(source_env.env) == before


def test_restore_without_env_uses_the_default_location_not_the_snapshots_path(
    source_env: Provisioned, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot's env.path is only shown: a file from another machine must not pick the target."""
    code, doc = cli(["snapshot", "restore", str(exported), "--allow-cpu", "--dry-run"], source_env.environ, capsys)
    assert code == 0, doc
    data_dir = Path(source_env.environ["TFGPU_DATA_DIR"])
    assert Path(doc["env"]).parent == data_dir / "envs" and Path(doc["env"]).name.startswith("tf")
    assert doc["taken_at"] == str(source_env.env) != doc["env"]
    from tfgpu_install.cli import main

    code = main(["snapshot", "restore", str(exported), "--allow-cpu", "--dry-run"], environ=source_env.environ)
    out = capsys.readouterr().out
    assert code == 0 and f"snapshot was taken at {source_env.env}" in out, out


def test_restore_failing_midway_over_an_env_puts_it_back(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfgpu_install.files import tree_digest

    target = tmp_path / "restored"
    code, doc = cli(["snapshot", "restore", str(exported), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0, doc
    extra = build_wheel(WheelSpec("extra-tool", "1.0", {"extra_tool/__init__.py": b"X = 1\n"}), tmp_path / "w")
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(target / "bin" / "python"),
                    "--index-url", source_env.index_url, str(extra), "protobuf==5.0.0"],
                   env=source_env.environ, check=True, capture_output=True)

    def digest() -> dict[str, str]:
        return {k: v for k, v in tree_digest(target).items() if "__pycache__" not in k}

    before, frozen = digest(), freeze(target)
    # The disk fails half-way through removing the extras.
    with armed(fail_at="packages.sync:middle:eio"):
        code, err = cli(["snapshot", "restore", str(exported), "--env", str(target), "--allow-cpu", "-y"],
                        source_env.environ, capsys)
    assert code == ExitCode.STEP_FAILED, err
    assert "undone" in err["message"]
    assert freeze(target) == frozen
    assert digest() == before


def test_restore_over_code_swapped_at_the_same_version_repairs_it(
    source_env: Provisioned, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same name, same version, same size, other bytes: the restore compares every installed
    file with its record, reinstalls the package, and only then says identical."""
    import hashlib
    import os

    sp = sorted(source_env.env.glob("lib/python3*/site-packages"))[-1]
    src = sp / "absl" / "__init__.py"
    original = src.read_bytes()
    swapped = original[:-1] + (b"#" if original[-1:] != b"#" else b"!")
    tmp = src.with_name("swap.tmp")
    tmp.write_bytes(swapped)
    os.replace(tmp, src)  # a new file: uv's hard-linked cache copy is untouched
    before = freeze(source_env.env)
    code, doc = cli(["snapshot", "restore", str(exported), "--env", str(source_env.env), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0 and doc["identical"] is True and doc["installed_files"]["clean"] is True, doc
    assert doc["installed_files"]["full"] is True
    assert {s["id"]: s["status"] for s in doc["steps"]}["packages.install"] == "applied"
    assert hashlib.sha256(src.read_bytes()).digest() == hashlib.sha256(original).digest()
    assert freeze(source_env.env) == before
