"""`snapshot image` for real: a provisioned env (real uv from the local index) exported with
hashes; the build context's bundle verifies; with --oci, an image on a Debian base made from a
debootstrap rootfs (umoci), inspected with skopeo, unpacked with umoci, and in its rootfs (chroot)
`import tensorflow` works and the image's own verify command passes (on the CPU: no GPU here).

The tools come from Debian's packages (.ci/run installs debootstrap, umoci, skopeo); without them,
or without root, the OCI test is skipped and says why. Containers themselves (podman/buildah)
are not run: on the machines this runs on podman starts no container (crun cannot set rlimits, and
cgroups are in hybrid mode)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.promised import require_tool
from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    needs_gcc,
    served_index,
    source_env,
)
from tfgpu_install.errors import ExitCode
from tfgpu_install.snapshot import bundle

pytestmark = needs_gcc


@pytest.fixture(scope="module")
def exported(source_env: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tfgpu_install.cli import main

    out = tmp_path_factory.mktemp("image-export") / "snap.yaml"
    assert main(["snapshot", "export", "--env", str(source_env.env), "-o", str(out), "--json"],
                environ=source_env.environ) == 0
    return out


def test_build_context_has_dockerfile_bundle_and_check(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ctx"
    code, doc = cli(["snapshot", "image", str(exported), "-o", str(out)], source_env.environ, capsys)
    assert code == 0, doc
    text = (out / "Dockerfile").read_text()
    py = "%d.%d" % sys.version_info[:2]
    assert f"ARG BASE=python:{py}-slim" in text and "--no-index --require-hashes" in text
    assert "ENV LD_LIBRARY_PATH=/opt/tfgpu/site/nvidia/" in text and "HEALTHCHECK" in text
    snap, manifest = bundle.verify(out / "bundle")  # every wheel against its hash
    assert manifest["snapshot_id"] == snap.id and (out / "gpucheck" / "check.py").is_file()
    assert doc["oci"] is None
    # a second run refuses to write over it
    code, doc = cli(["snapshot", "image", str(exported), "-o", str(out)], source_env.environ, capsys)
    assert code == ExitCode.USAGE and "not empty" in doc["message"]


def test_oci_needs_a_base_layout_and_checks_it_first(
    source_env: Provisioned, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = cli(["snapshot", "image", str(exported), "-o", str(tmp_path / "a"), "--oci"],
                    source_env.environ, capsys)
    assert code == ExitCode.USAGE and "skopeo copy" in doc["hint"]
    bad = tmp_path / "bad-layout"
    bad.mkdir()
    (bad / "index.json").write_text('{"manifests": [{"digest": "sha256:../../etc/passwd"}]}')
    code, doc = cli(["snapshot", "image", str(exported), "-o", str(tmp_path / "b"), "--oci", "--base-layout", str(bad)],
                    source_env.environ, capsys)
    assert code == ExitCode.BAD_INPUT and not (tmp_path / "b").exists()


def _need(*tools: str) -> None:
    for tool in tools:
        require_tool(tool, "the OCI image test builds its Debian base with it (.ci/run installs it)")
    if os.geteuid() != 0:
        pytest.skip("debootstrap, umoci unpack and chroot need root")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the Debian bookworm base has Python 3.11; the snapshot's wheels are for this interpreter")


def _run(*argv: str, env: Any = None, timeout: float = 1200) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"{argv[:3]}: {(done.stdout + done.stderr)[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def debian_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Debian bookworm base image (minbase + python3) as an OCI layout, made with debootstrap + umoci."""
    _need("debootstrap", "umoci", "skopeo", "chroot")
    reuse = os.environ.get("TFGPU_TEST_DEBIAN_LAYOUT")  # a layout this fixture made before (local re-runs)
    if reuse and (Path(reuse) / "index.json").is_file():
        return Path(reuse)
    tmp = tmp_path_factory.mktemp("debian-base")
    rootfs = tmp / "rootfs"
    _run("debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(rootfs),
         "http://deb.debian.org/debian", timeout=1800)
    layout = tmp / "layout"
    _run("umoci", "init", "--layout", str(layout))
    _run("umoci", "new", "--image", f"{layout}:bookworm")
    _run("umoci", "insert", "--image", f"{layout}:bookworm", str(rootfs), "/")
    return layout


def test_oci_image_unpacks_imports_tensorflow_and_verifies(
    source_env: Provisioned, exported: Path, debian_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ctx"
    code, doc = cli(["snapshot", "image", str(exported), "-o", str(out), "--oci", "--base-layout",
                     f"{debian_base}:bookworm"], source_env.environ, capsys)
    assert code == 0, doc
    config = json.loads(_run("skopeo", "inspect", "--config", f"oci:{out / 'oci'}:latest"))
    env = dict(e.split("=", 1) for e in config["config"]["Env"])
    assert env["PYTHONPATH"] == "/opt/tfgpu/site" and "/opt/tfgpu/site/nvidia/cublas/lib" in env["LD_LIBRARY_PATH"]
    assert config["config"]["Cmd"] == doc["verify"]
    unpacked = tmp_path / "unpacked"
    _run("umoci", "unpack", "--image", f"{out / 'oci'}:latest", str(unpacked))
    rootfs = unpacked / "rootfs"
    assert (rootfs / "usr" / "bin" / "python3").exists()  # the base's layer is there
    chroot = shutil.which("chroot") or "chroot"
    seen = _run(chroot, str(rootfs), "python3", "-c",
                "import os, tensorflow as tf; print(tf.__version__); print(os.environ['LD_LIBRARY_PATH'])", env=env)
    assert seen.splitlines()[0] == "2.99.0"
    # the image's own verify command (no GPU here: on the CPU, as --allow-cpu does)
    _run(chroot, str(rootfs), *config["config"]["Cmd"], "--cpu-ok", env=env, timeout=600)
