"""`tfgpu-install cluster slurm --shared DIR ...` and `tfgpu-install cluster kube SNAPSHOT --image IMG -o DIR`.

slurm: a verified env per node type of a Slurm cluster (sinfo's types; one job per type placed by
sbatch --constraint/--gres; one row per type). Exit 0: every type verified; 7: a type failed, was refused
or is still pending/running at --wait (its row says why, with the scheduler's reason); 6: no Slurm here or
the shared path is not writable; 5: a bad type name or partition.
kube: Job and DaemonSet manifests from a snapshot, checked by our rules (no API server is contacted)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode, UsageError
from tfgpu_install.guard import argtypes
from tfgpu_install.report import Block, Bullets, Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.app.cluster import Manifests
    from tfgpu_install.cluster.flow import ClusterReport

COLUMNS = ("type", "nodes", "partition", "TF", "CUDA", "state", "verified", "job", "reason")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tfgpu_install.fleet.options import count, file_arg, seconds

    sub = p.add_subparsers(dest="cluster_command", metavar="SCHEDULER", parser_class=type(p))
    sub.required = True
    s = sub.add_parser("slurm", help="a verified env per node type of a Slurm cluster",
                       description="a verified env per node type of a Slurm cluster")
    s.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document")
    s.add_argument("--shared", required=True, metavar="DIR", type=file_arg,
                   help="a directory every node mounts at the same path (tool, envs, results)")
    s.add_argument("--profile", default="stable", help="profile name or policy file on the shared path")
    s.add_argument("--snapshot", metavar="FILE", type=file_arg, help="restore this snapshot on every type instead")
    s.add_argument("--same", action="store_true", help="one TensorFlow release every node type can run")
    s.add_argument("--wheel", metavar="FILE", type=file_arg, help="the tfgpu-install wheel (default: this tool's own)")
    s.add_argument("--index-url", metavar="URL", type=argtypes.url, help="the package index the nodes install from")
    s.add_argument("--allow-cpu", action="store_true", help="types without a usable GPU verify on the CPU")
    s.add_argument("--partition", metavar="NAME", help="only this partition's nodes")
    s.add_argument("--type", dest="types", action="append", default=[], metavar="NAME",
                   help="only this node type (repeatable)")
    s.add_argument("--job-prefix", metavar="WORDS", default="",
                   help="run each job inside this first (e.g. 'apptainer exec img.sif', 'chroot /srv/root')")
    s.add_argument("--job-env", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                   help="an environment variable for the jobs (repeatable)")
    s.add_argument("--python", default="python3", metavar="PYTHON", help="the nodes' Python for the tool's venv")
    s.add_argument("--gpus", type=count, default=1, metavar="N", help="GPUs per verification job (default 1)")
    s.add_argument("--wait", type=seconds, default=1800.0, metavar="S",
                   help="how long a job may stay pending (default 1800); then its type reads 'pending' with the "
                   "scheduler's reason (a started job is waited for, up to --job-timeout)")
    s.add_argument("--job-timeout", type=seconds, default=3600.0, metavar="S",
                   help="bound on one job's run (its sbatch --time; default 3600)")
    s.add_argument("--modulefiles", metavar="DIR", type=argtypes.output,
                   help="write a module file per verified type under DIR/tfgpu/ (module load tfgpu/TYPE)")
    s.add_argument("--module-format", choices=("lua", "tcl"), default="lua", help="Lmod (lua) or Tcl modules")
    k = sub.add_parser("kube", help="Kubernetes Job/DaemonSet manifests from a snapshot",
                       description="Kubernetes Job/DaemonSet manifests from a snapshot (no API server is contacted)")
    k.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document")
    k.add_argument("snapshot", metavar="SNAPSHOT", type=file_arg, help="a snapshot file or stored id")
    k.add_argument("--image", required=True, help="the image `snapshot image` built, pinned (tag or digest)")
    k.add_argument("--product", action="append", default=[], metavar="NAME",
                   help="a GPU product (e.g. 'NVIDIA A100-SXM4-40GB'; default: the snapshot host's GPUs)")
    k.add_argument("--namespace", default="default")
    k.add_argument("--no-daemonset", action="store_true", help="only the per-product Jobs")
    k.add_argument("-o", "--output", required=True, metavar="DIR", type=argtypes.output)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def run(args: argparse.Namespace, ctx: Context) -> Result:
    if args.cluster_command == "kube":
        return _kube(args, ctx)
    import shlex

    from tfgpu_install.app.cluster import slurm
    from tfgpu_install.cluster.flow import SlurmRequest, TypeRow

    if args.same and args.snapshot:
        raise UsageError("--same and --snapshot exclude each other", hint="a snapshot is already one combination")
    try:
        prefix = tuple(shlex.split(args.job_prefix))
    except ValueError as exc:
        raise UsageError(f"--job-prefix: {exc}", hint="quote it as you would in sh") from exc
    req = SlurmRequest(
        shared=Path(args.shared).expanduser().resolve(), profile=args.profile,
        snapshot=Path(args.snapshot).expanduser().resolve() if args.snapshot else None, same=args.same,
        wheel=Path(args.wheel).expanduser().resolve() if args.wheel else None, index_url=args.index_url,
        allow_cpu=args.allow_cpu, partition=args.partition, only_types=tuple(args.types), job_prefix=prefix,
        job_env=tuple(args.job_env), python=args.python, wait_s=args.wait, job_timeout_s=args.job_timeout,
        gpus=args.gpus,
        modulefiles=Path(args.modulefiles).resolve() if args.modulefiles else None, module_format=args.module_format)
    stream = None if args.json else sys.stderr

    def on_row(row: "TypeRow") -> None:
        if stream is not None:
            stream.write(f"{row.type}: {row.state}\n")

    return _result(slurm(ctx, req, on_row))


def _verified(row: Any) -> str:
    if row.verified is None:
        return "-"
    if not row.verified:
        return "no"
    return "GPU" if row.gpu_verified else "CPU only"


def _result(report: "ClusterReport") -> Result:
    rows = [(r.type, ",".join(r.nodes), ",".join(r.partitions), r.tensorflow or "-", r.cuda or "-", r.state,
             _verified(r), r.job_id or "-", r.reason or "") for r in report.types]
    counts: dict[str, int] = {}
    for r in report.types:
        counts[r.state] = counts.get(r.state, 0) + 1
    data: dict[str, Any] = {"scheduler": report.scheduler, "key": report.key, "shared": report.shared,
                            "types": [r.to_json() for r in report.types], "summary": counts, "same": report.same,
                            "submitted": report.submitted}
    blocks: list[Block] = [table(f"cluster ({report.scheduler}), {report.shared}", COLUMNS, rows)]
    if report.same:
        blocks.append(Bullets("--same", tuple(report.same["explain"])))
    ok = all(r.state == "verified" for r in report.types)
    blocks.append(Text(", ".join(f"{n} {s}" for s, n in sorted(counts.items())), "ok" if ok else "error"))
    return Result(data, blocks, exit_code=int(ExitCode.OK if ok else ExitCode.STEP_FAILED))


def _kube(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.cluster import KubeRequest, kube

    return written(kube(ctx, KubeRequest(snapshot=args.snapshot, image=args.image, products=tuple(args.product),
                                         namespace=args.namespace, daemonset=not args.no_daemonset,
                                         output=args.output)))


def written(done: "Manifests") -> Result:
    data = {"snapshot": done.snapshot, "output": str(done.output), "files": list(done.files), "image": done.image,
            "api_server": "not contacted: validate with `kubectl apply --dry-run=server` on your cluster"}
    return Result(data, [Text(f"{len(done.files)} manifest(s) for snapshot {done.snapshot} in {done.output}", "ok"),
                         Text("no API server was contacted: the manifests were checked against our rules only", "dim")])
