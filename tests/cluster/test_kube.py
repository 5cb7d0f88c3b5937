"""Kubernetes manifests from a snapshot (#42): validated offline against two real API versions' schemas
(kubernetes-validate, strict), held to our own rules for what schemas miss (each rule attacked with a
mutated manifest next to the sane one), and the Job's container run for real: no Docker engine runs on
these machines, so the same command, with the same env, runs in the rootfs of the `snapshot image --oci`
image (umoci unpack + chroot), where the Job's log is the check's JSON. No API server is exercised."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.restore_kit import Provisioned, served_index, source_env  # noqa: F401 (fixtures)
from tfgpu_install.cluster import kube

API_VERSIONS = ("1.29.0", "1.34.0")
CMD = ["python3", "/opt/tfgpu/gpucheck/check.py", "--plan-json", "{}"]
ENV = {"PYTHONPATH": "/opt/tfgpu/site", "LD_LIBRARY_PATH": "/opt/tfgpu/site/nvidia/cublas/lib"}


def _docs() -> list[dict[str, Any]]:
    return [kube.job("a1b2c3d4e5f60718", "NVIDIA A100-SXM4-40GB", "registry.example/tf:2.99.0", CMD, ENV),
            kube.job("a1b2c3d4e5f60718", "Tesla T4", "registry.example/tf@sha256:" + "a" * 64, CMD, ENV),
            kube.daemonset("a1b2c3d4e5f60718", "registry.example/tf:2.99.0", CMD, ENV)]


@pytest.mark.parametrize("version", API_VERSIONS)
def test_manifests_pass_the_api_schemas(version: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    for doc in _docs():
        kv.validate(doc, version, strict=True)  # raises on any schema error (strict: no unknown fields)
        assert kube.rules(doc) == [], doc["metadata"]["name"]


def test_the_schemas_do_see_a_broken_manifest() -> None:
    """The control for the validator itself: a field of the wrong type is caught."""
    kv = pytest.importorskip("kubernetes_validate")
    bad = copy.deepcopy(_docs()[0])
    bad["spec"]["backoffLimit"] = "none"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, API_VERSIONS[0], strict=True)


def _mutate(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return out


_DELETE = object()
POD = "spec.template.spec"


@pytest.mark.parametrize("path, value, words", [
    (f"{POD}.containers.0.resources", {"requests": {kube.GPU: 1}}, "requested without a limit"),
    (f"{POD}.restartPolicy", "OnFailure", "restarts never"),
    ("spec.backoffLimit", 6, "retried"),
    ("spec.activeDeadlineSeconds", _DELETE, "run forever"),
    (f"{POD}.nodeSelector", {}, "another GPU product"),
    (f"{POD}.containers.0.image", "registry.example/tf:latest", "not pinned"),
    (f"{POD}.containers.0.image", "registry.example/tf", "not pinned"),
    (f"{POD}.containers.0.resources", {"limits": {"cpu": "1"}}, "without a GPU"),
    ("metadata.name", "Tfgpu_Verify", "DNS-1123"),
])
def test_our_rules_catch_what_the_schemas_let_through(path: str, value: Any, words: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    bad = _mutate(_docs()[0], path, value)
    if path != "metadata.name":
        kv.validate(bad, API_VERSIONS[1], strict=True)  # valid by the schema...
    assert any(words in p for p in kube.rules(bad)), kube.rules(bad)  # ...but not by our rules


def test_a_daemonset_check_must_be_an_init_container() -> None:
    ds = _docs()[2]
    bad = copy.deepcopy(ds)
    spec = bad["spec"]["template"]["spec"]
    spec["containers"] = spec.pop("initContainers")
    assert any("init container" in p for p in kube.rules(bad))


def test_product_labels_as_gpu_feature_discovery_writes_them() -> None:
    assert kube.product_label("NVIDIA A100-SXM4-40GB") == "NVIDIA-A100-SXM4-40GB"
    assert kube.product_label("NVIDIA GeForce RTX 4090") == "NVIDIA-GeForce-RTX-4090"
    assert kube.product_label("A\x1b[31mB") == "A31mB"  # no control character reaches a manifest
    with pytest.raises(ValueError):
        kube.product_label("  \x1b[ ] ")


# --- the Job's container, run ------------------------------------------------------------------------------

def _tools_missing() -> str | None:
    if os.geteuid() != 0:
        return "umoci unpack and chroot need root"
    for tool in ("umoci", "chroot"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install umoci)"
    return None


def run_job_container(job: dict[str, Any], rootfs: Path, extra: list[str]) -> dict[str, Any]:
    """The Job's container as the kubelet would start it: its command and env, in the image's rootfs (chroot:
    no container engine runs on these machines; `docker info` finds no daemon)."""
    c = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"]}
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    done = subprocess.run([chroot, str(rootfs), *c["command"], *extra], capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


@pytest.fixture(scope="module")
def image_rootfs(source_env: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """A real env exported as a snapshot, its `snapshot image --oci` built on a Debian 12 base (the fleet demo's
    debootstrapped root, made an OCI layout with umoci), and that image unpacked: (snapshot, rootfs)."""
    reason = _tools_missing()
    if reason:
        pytest.skip(reason)
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fleet_demo

    from tfgpu_install.cli import main
    from tfgpu_install.snapshot.model import load

    tree, note = fleet_demo.debootstrapped()
    if tree is None:
        pytest.skip(f"no Debian root filesystem for the image's base: {note}")
    tmp = tmp_path_factory.mktemp("kube-image")
    snap_file = tmp / "snap.yaml"
    assert main(["snapshot", "export", "--env", str(source_env.env), "-o", str(snap_file), "--json"],
                environ=source_env.environ) == 0
    layout = tmp / "base"
    for argv in (["umoci", "init", "--layout", str(layout)], ["umoci", "new", "--image", f"{layout}:bookworm"],
                 ["umoci", "insert", "--image", f"{layout}:bookworm", str(tree), "/"]):
        subprocess.run(argv, check=True, capture_output=True, timeout=1200)
    out = tmp / "image"
    assert main(["snapshot", "image", str(snap_file), "-o", str(out), "--oci", "--base-layout", f"{layout}:bookworm",
                 "--json"], environ=source_env.environ) == 0
    subprocess.run(["umoci", "unpack", "--image", f"{out / 'oci'}:latest", str(tmp / "unpacked")], check=True,
                   capture_output=True, timeout=1200)
    return load(snap_file), tmp / "unpacked" / "rootfs"


def test_the_jobs_container_runs_the_check_in_the_image(image_rootfs: tuple[Any, Path]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    snap, rootfs = image_rootfs
    docs = kube.manifests(snap, "registry.example/tf:" + snap.id[:12], ["NVIDIA A100-SXM4-40GB"], daemon=True)
    job = docs["job-nvidia-a100-sxm4-40gb.yaml"]
    for doc in docs.values():
        for version in API_VERSIONS:
            kv.validate(doc, version, strict=True)
        assert kube.rules(doc) == []
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["command"][:2] == ["python3", "/opt/tfgpu/gpucheck/check.py"]  # the image's own CMD
    # No Docker engine here (said in the module doc): the same command and env in the image's rootfs. No GPU
    # either: --cpu-ok, as --allow-cpu does; on a GPU node the Job runs the command as it is.
    report = run_job_container(job, rootfs, ["--cpu-ok"])
    assert report["ok"] is True and report["gpu_verified"] is False
    assert any(lay["name"] == "tensorflow" and lay["status"] == "pass" for lay in report["layers"])
