"""Kubernetes manifests from a snapshot: a Job per GPU product (the GPU Feature Discovery label
`nvidia.com/gpu.product` as its node selector, one `nvidia.com/gpu` in its limits, restartPolicy Never,
no retries, a deadline), and a DaemonSet form for "every GPU node" (the check as an init container, its
answer in that container's log). The container is the image `snapshot image` builds: the same environment
variables and the same layered-check command as its CMD, so the Job's log is the check's JSON.

Nothing here talks to an API server. `rules()` holds what API schemas do not say (a GPU requested without a
limit, a Job that restarts forever, no deadline, a selector that lets the Job land on another product)."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU Feature Discovery
PRESENT_LABEL = "nvidia.com/gpu.present"  # GPU Feature Discovery / the GPU Operator
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DEADLINE_S = 1800


def product_label(gpu_name: str) -> str:
    """GFD's label value for a GPU name: spaces to '-', anything a label value cannot hold dropped
    ("NVIDIA A100-SXM4-40GB" -> "NVIDIA-A100-SXM4-40GB")."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "", "-".join(gpu_name.split()))[:63].strip("-_.")
    if not value or not _LABEL_VALUE.match(value):
        raise ValueError(f"{gpu_name!r} gives no usable label value")
    return value


def _slug(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "x"


def _container(name: str, image: str, command: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "command": list(command),
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "resources": {"limits": {GPU: 1}},
    }


def _labels(snapshot_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "tfgpu-verify", "app.kubernetes.io/managed-by": "tfgpu-install",
            "tfgpu-install/snapshot": _slug(snapshot_id, 63)}


def job(snapshot_id: str, product: str, image: str, command: Sequence[str], env: Mapping[str, str],
        namespace: str = "default") -> dict[str, Any]:
    value = product_label(product)
    name = f"tfgpu-verify-{_slug(snapshot_id, 12)}-{_slug(value, 30)}"
    labels = {**_labels(snapshot_id), PRODUCT_LABEL: value}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,  # a failed check is an answer, not something to retry
            "activeDeadlineSeconds": DEADLINE_S,
            "ttlSecondsAfterFinished": 7 * 86400,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {PRODUCT_LABEL: value},
                    "containers": [_container("check", image, command, env)],
                },
            },
        },
    }


def daemonset(snapshot_id: str, image: str, command: Sequence[str], env: Mapping[str, str],
              namespace: str = "default") -> dict[str, Any]:
    """Every GPU node: the check runs once per node as an init container (its log is the answer); the pod then
    idles (a DaemonSet's pods must keep running), holding the GPU it was given (say so in the docs)."""
    name = f"tfgpu-verify-{_slug(snapshot_id, 12)}-all"
    labels = {**_labels(snapshot_id), "tfgpu-install/form": "daemonset"}
    idle = _container("idle", image, ["python3", "-c", "import time\nwhile True: time.sleep(3600)"], {})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "tfgpu-verify", "tfgpu-install/form": "daemonset"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {PRESENT_LABEL: "true"},
                    "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                    "initContainers": [_container("check", image, command, env)],
                    "containers": [idle],
                },
            },
        },
    }


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for key in ("initContainers", "containers") for c in pod.get(key) or [] if isinstance(c, dict)]


def rules(doc: Mapping[str, Any]) -> list[str]:
    """Problems API schemas do not catch; [] when none."""
    problems: list[str] = []
    kind = doc.get("kind")
    meta = doc.get("metadata") or {}
    name = str(meta.get("name", ""))
    if not _DNS1123.match(name):
        problems.append(f"metadata.name {name!r} is not a DNS-1123 label (63 characters at most)")
    spec = doc.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    for c in _containers(pod):
        res = c.get("resources") or {}
        req, lim = (res.get("requests") or {}).get(GPU), (res.get("limits") or {}).get(GPU)
        if req is not None and lim is None:
            problems.append(f"container {c.get('name')}: {GPU} requested without a limit (GPUs are set in limits)")
        if req is not None and lim is not None and req != lim:
            problems.append(f"container {c.get('name')}: {GPU} request {req} differs from its limit {lim}")
        image = str(c.get("image") or "")
        if not image or image.endswith(":latest") or (":" not in image.rsplit("/", 1)[-1] and "@" not in image):
            problems.append(f"container {c.get('name')}: image {image!r} is not pinned (a tag other than latest, "
                            "or a digest): the check must run what was built")
    gpu_containers = [c for c in _containers(pod) if GPU in ((c.get("resources") or {}).get("limits") or {})]
    if not gpu_containers:
        problems.append(f"no container has {GPU} in its limits: the check would run without a GPU")
    if kind == "Job":
        if pod.get("restartPolicy") != "Never":
            problems.append(f"restartPolicy {pod.get('restartPolicy')!r}: a check Job restarts never")
        if spec.get("backoffLimit") != 0:
            problems.append(f"backoffLimit {spec.get('backoffLimit')!r}: a failed check is retried (want 0)")
        if not isinstance(spec.get("activeDeadlineSeconds"), int):
            problems.append("no activeDeadlineSeconds: a hung check would run forever")
        if PRODUCT_LABEL not in (pod.get("nodeSelector") or {}):
            problems.append(f"no nodeSelector on {PRODUCT_LABEL}: the Job may land on another GPU product")
    elif kind == "DaemonSet":
        if not pod.get("initContainers"):
            problems.append("the check is not an init container: it would restart forever in a DaemonSet")
    else:
        problems.append(f"kind {kind!r} is not one this tool writes")
    return problems


def manifests(snap: Any, image: str, products: Sequence[str], namespace: str = "default",
              daemon: bool = True) -> dict[str, dict[str, Any]]:
    """file name -> manifest: one Job per product (default: the snapshot host's GPUs) and the DaemonSet."""
    from tfgpu_install.snapshot.image import spec_for

    spec = spec_for(snap)
    names = list(dict.fromkeys(products or [str(g.get("name")) for g in snap.host.gpus if g.get("name")]))
    out: dict[str, dict[str, Any]] = {}
    for product in names:
        doc = job(snap.id, product, image, spec.verify_argv(), spec.env(), namespace)
        out[f"job-{_slug(product_label(product), 40)}.yaml"] = doc
    if daemon:
        out["daemonset.yaml"] = daemonset(snap.id, image, spec.verify_argv(), spec.env(), namespace)
    return out
