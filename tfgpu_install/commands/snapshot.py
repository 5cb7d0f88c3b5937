"""`tfgpu-install snapshot export|restore|list|show|diff|bundle`.

restore exits 12 (INCOMPATIBLE_HOST) when this host does not meet the snapshot's contract
(every reason listed), 8 (DOWNLOAD) when a package or bundle file does not match its hash
(the partial restore is undone), 5 (BAD_INPUT) for a damaged snapshot or bundle manifest,
9 (VERIFY_FAILED) when the restored env fails verification or differs from the snapshot."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_assume_flags, add_env_flag, assume_flags, non_empty
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode, UsageError
from tfgpu_install.guard import argtypes
from tfgpu_install.guard.envpath import env_path_arg
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table
from tfgpu_install.snapshot.exports import FORMATS

if TYPE_CHECKING:
    from tfgpu_install.app.image import Image
    from tfgpu_install.app.restore import RestorePlan
    from tfgpu_install.app.snapshot import Compared, Exported
    from tfgpu_install.snapshot.document import Snapshot
    from tfgpu_install.snapshot.model import Store


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="snapshot_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    ex = sub.add_parser("export", help="write a snapshot of an env (native YAML, requirements, conda, pylock)")
    add_env_flag(ex)
    ex.add_argument("-o", "--output", metavar="FILE", type=argtypes.output,
                    help="where to write it (native format: default the store)")
    ex.add_argument("--format", choices=tuple(FORMATS), default="tfgpu",
                    help="; ".join(f"{f.name}: {f.summary}" for f in FORMATS.values()))
    ex.add_argument("--no-hashes", action="store_true", help="skip looking up package hashes on the index")
    ex.add_argument("--index-url", metavar="URL", type=argtypes.url,
                    help="the index to look hashes up on (default: as pip/uv are set)")
    re_ = sub.add_parser("restore", help="rebuild the env a snapshot describes, after checking this host")
    re_.add_argument("file", metavar="FILE", type=non_empty, help="a snapshot file or stored snapshot id")
    re_.add_argument("--env", metavar="PATH", type=env_path_arg, help="the target environment (default: under the "
                     "user data dir, named after the snapshot's combination)")
    re_.add_argument("--offline", metavar="DIR", type=non_empty,
                     help="install only from a bundle made by `snapshot bundle`")
    re_.add_argument("--index-url", metavar="URL", type=argtypes.url, help="package index (default: as pip/uv are set)")
    re_.add_argument("--allow-cpu", action="store_true", help="restore on a host without a usable GPU")
    re_.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    re_.add_argument("--dry-run", action="store_true", help="check the host and show the steps; change nothing")
    add_assume_flags(re_)
    ls = sub.add_parser("list", help="stored snapshots, oldest first")
    sh = sub.add_parser("show", help="one snapshot")
    sh.add_argument("id", metavar="ID", type=non_empty, help="id, unique id prefix, or file")
    df = sub.add_parser("diff", help="what differs between two snapshots")
    df.add_argument("a", metavar="A", type=non_empty)
    df.add_argument("b", metavar="B", type=non_empty)
    bu = sub.add_parser("bundle", help="download every wheel a snapshot needs, with hashes, for offline restore")
    bu.add_argument("file", metavar="FILE", type=non_empty, help="a snapshot file or stored snapshot id")
    bu.add_argument("-o", "--output", metavar="DIR", type=argtypes.output, required=True, help="the bundle directory")
    bu.add_argument("--index-url", metavar="URL", type=argtypes.url, help="package index (default: as pip/uv are set)")
    im = sub.add_parser("image", help="a container image build context (Dockerfile + offline bundle), or an OCI layout")
    im.add_argument("file", metavar="FILE", type=non_empty, help="a snapshot file or stored snapshot id")
    im.add_argument("-o", "--output", metavar="DIR", type=argtypes.output, required=True,
                    help="the build context directory")
    im.add_argument("--base", metavar="IMAGE", help="FROM image (default: python:X.Y-slim of the snapshot's Python; "
                    "NVIDIA's CUDA runtime image when the snapshot takes CUDA from the system)")
    im.add_argument("--oci", action="store_true", help="also write an OCI image layout in DIR/oci (no daemon needed)")
    im.add_argument("--base-layout", metavar="DIR[:TAG]", type=non_empty,
                    help="with --oci: the base image as a local OCI layout (skopeo copy docker://IMAGE oci:DIR:TAG)")
    im.add_argument("--tag", default="latest", help="with --oci: the image's name in the layout")
    im.add_argument("--index-url", metavar="URL", type=argtypes.url,
                    help="package index for the wheels (default: as pip/uv are set)")
    im.add_argument("--bundle", metavar="DIR", type=non_empty,
                    help="take the wheels from this bundle (`snapshot bundle`), verified against its manifest and "
                    "the snapshot's hashes; only what it lacks is fetched")
    for sp in (ex, re_, ls, sh, df, bu, im):
        sp.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
        sp.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app import snapshot as snapshot_cmds
    from tfgpu_install.app.restore import BundleRequest, RestoreRequest, bundle, restore
    from tfgpu_install.commands.snapshot_restore import bundled, head, restored

    if args.snapshot_command == "restore":
        from tfgpu_install.commands.confirm import confirm

        def ask(plan: "RestorePlan") -> None:
            confirm(ctx, args.yes, lambda: head(ctx, plan))

        return restored(ctx, restore(ctx, RestoreRequest(
            file=args.file, env=args.env, offline=args.offline, index_url=args.index_url, allow_cpu=args.allow_cpu,
            assume=assume_flags(args), yes=args.yes, dry_run=args.dry_run, progress=not args.json,
        ), ask))
    if args.snapshot_command == "bundle":
        return bundled(ctx, bundle(ctx, BundleRequest(file=args.file, output=args.output, index_url=args.index_url)))
    if args.snapshot_command == "image":
        from tfgpu_install.app.image import ImageRequest, image

        return imaged(image(ctx, ImageRequest(file=args.file, output=args.output, base=args.base, oci=args.oci,
                                              base_layout=args.base_layout, tag=args.tag, index_url=args.index_url,
                                              bundle=args.bundle)))
    if args.snapshot_command == "export":
        return exported(snapshot_cmds.export(ctx, snapshot_cmds.ExportRequest(
            env=args.env, output=args.output, format=args.format, no_hashes=args.no_hashes, index_url=args.index_url,
        )))
    if args.snapshot_command == "list":
        return listed(snapshot_cmds.list_(ctx))
    if args.snapshot_command == "show":
        return shown(*snapshot_cmds.show(ctx, args.id))
    if args.snapshot_command == "diff":
        return compared(snapshot_cmds.diff(ctx, args.a, args.b))
    raise UsageError("snapshot needs an action", "export, restore, list, show, diff, bundle or image")


def exported(done: "Exported") -> Result:
    snap, out, fmt = done.snap, done.path, done.format
    data = {"id": snap.id, "format": fmt, "path": str(out), "packages": len(snap.packages),
            "files": len(snap.files), "notes": list(snap.notes)}
    blocks: list[Block] = [Text(f"snapshot {snap.id} of {done.env} written to {out} ({fmt}, "
                                f"{len(snap.packages)} packages, {len(snap.files)} library files)", "ok")]
    if snap.notes:
        blocks.append(Bullets("notes", snap.notes, "warn"))
    return Result(data, blocks)


def listed(store: "Store") -> Result:
    from tfgpu_install.snapshot.contract import choice_of

    stored = store.snapshots
    rows = [
        (s.id, s.kind, s.created, s.env.path, choice_of(s).tensorflow or None,
         "yes" if s.verification is not None and s.verification.ok else "-")
        for _, s in stored
    ]
    data = {"snapshots": [{"id": s.id, "kind": s.kind, "created": s.created, "env": s.env.path,
                           "tensorflow": choice_of(s).tensorflow or None, "path": str(p)} for p, s in stored]}
    blocks: list[Block] = [table("snapshots", ("id", "kind", "created", "env", "tensorflow", "verified"), rows)]
    if not stored:
        blocks = [Text("no snapshots yet: an install records one, or run `tfgpu-install snapshot export`")]
    return with_skipped(Result(data, blocks), store)


def with_skipped(result: Result, store: "Store") -> Result:
    """Damaged files in the store: a warning (and `skipped` in --json), never a failed command."""
    if store.damaged:
        result.data["skipped"] = list(store.damaged)
        result.blocks.append(Bullets("warnings", tuple(store.warnings()), "warn"))
    return result


def shown(path: Path, snap: "Snapshot") -> Result:
    from tfgpu_install.snapshot.contract import choice_of

    d = snap.to_dict()
    res = choice_of(snap)
    blocks: list[Block] = [
        Heading(f"snapshot {snap.id} ({snap.kind}, {snap.created})"),
        Text(f"env: {snap.env.path} ({snap.env.backend}, Python {snap.env.python})"),
        Text(f"TensorFlow {res.tensorflow or '?'}, CUDA {res.cuda or '-'}, cuDNN {res.cudnn or '-'}"),
        Text(f"host: driver {snap.host.driver or '-'} (CUDA <= {snap.host.max_cuda or '-'}), glibc "
             f"{snap.host.glibc or '-'}, GPUs: " + (", ".join(
                 f"{g.get('name')} (cc {g.get('compute_capability')})" for g in snap.host.gpus) or "none")),
        table("packages", ("name", "version", "hashes"), [(p.name, p.version, len(p.hashes)) for p in snap.packages]),
    ]
    return Result({**d, "path": str(path)}, blocks)


def compared(done: "Compared") -> Result:
    from tfgpu_install.snapshot.drift import to_jsonable

    a, b, d = done.a, done.b, done.drift
    blocks: list[Block] = [Heading(f"{a.id} -> {b.id}")]
    blocks.append(Bullets("", tuple(d.lines())) if not d.clean else Text("the same", "ok"))
    code = ExitCode.OK if d.clean else ExitCode.DRIFT
    return Result({"a": a.id, "b": b.id, **to_jsonable(d)}, blocks, exit_code=int(code))


def imaged(done: "Image") -> Result:
    out, spec, layout = done.path, done.spec, done.oci
    data = {"path": str(out), "snapshot": done.snapshot, "base": spec.base, "dockerfile": str(out / "Dockerfile"),
            "bundle": str(out / "bundle"), "wheels": done.wheels, "made_from": done.made_from,
            "oci": str(layout.path) if layout is not None else None, "tag": done.tag,
            "env": spec.env(), "verify": spec.verify_argv()}
    items = [f"build: podman build -t tf-{spec.tensorflow} {out}   (base {spec.base})"]
    if layout is not None:
        items.append(f"OCI layout: {layout.path}:{done.tag}, {layout.layers} layers ({layout.base_layers} from the "
                     f"base); e.g. `skopeo copy oci:{layout.path}:{done.tag} containers-storage:tf-snapshot`")
    if spec.cuda_from_system and spec.base_is_default:
        items.append(f"the base {spec.base} is derived from the snapshot's CUDA/cuDNN: check NVIDIA publishes "
                     "it, or pass --base")
    return Result(data, [Text(f"image build context for snapshot {done.snapshot} written to {out}", "ok"),
                         Bullets("next", tuple(items))])
