"""`cluster slurm` and `cluster kube`: a verified env per node type of a Slurm cluster (the engine in
tfgpu_install/cluster/flow.py), and Kubernetes manifests from a snapshot, written after our rules pass.
commands/cluster.py renders both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfgpu_install.cluster.flow import ClusterReport, OnRow, SlurmRequest, cluster_slurm
from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, UsageError


def slurm(ctx: Context, req: SlurmRequest, on_row: OnRow) -> ClusterReport:
    """One job per node type; `on_row` sees each type's row as its state changes."""
    return cluster_slurm(ctx, req, on_row)


@dataclass(frozen=True)
class KubeRequest:
    snapshot: str  # a snapshot file or stored id
    image: str  # the image `snapshot image` built, pinned
    products: tuple[str, ...] = ()  # GPU products (none: the snapshot host's GPUs)
    namespace: str = "default"
    daemonset: bool = True
    output: str = "."


@dataclass(frozen=True)
class Manifests:
    """The manifests written (commands/cluster.py renders them)."""

    snapshot: str  # its id
    output: Path
    files: tuple[str, ...]  # file names in output, sorted
    image: str


def kube(ctx: Context, req: KubeRequest) -> Manifests:
    """A Job per GPU product and the DaemonSet for the snapshot, checked by our rules before any is written
    (no API server is contacted)."""
    import yaml

    from tfgpu_install.cluster import kube as manifests
    from tfgpu_install.files import atomic_write
    from tfgpu_install.snapshot.model import find

    _, snap = find(ctx.state_dir, req.snapshot)
    try:
        docs = manifests.manifests(snap, req.image, req.products, req.namespace, daemon=req.daemonset)
    except ValueError as exc:
        raise UsageError(str(exc), hint="give --product as the GPU's name, e.g. 'NVIDIA A100-SXM4-40GB'") from exc
    if not docs:
        raise BadInputError(f"snapshot {snap.id} names no GPU and no --product was given",
                            hint="give --product NAME for each GPU product the Jobs should cover")
    problems = {name: manifests.rules(doc) for name, doc in docs.items()}
    bad = {n: p for n, p in problems.items() if p}
    if bad:
        raise UsageError("the manifests break our rules: " + "; ".join(f"{n}: {', '.join(p)}" for n, p in bad.items()),
                         hint="pin --image to a tag or digest")
    out = Path(req.output).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        atomic_write(out / name, yaml.safe_dump(doc, sort_keys=False))
    return Manifests(snap.id, out, tuple(sorted(docs)), req.image)
