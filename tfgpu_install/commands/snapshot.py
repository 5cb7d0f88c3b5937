"""`tfgpu-install snapshot export|restore|list|show|diff|bundle`.

restore exits 12 (INCOMPATIBLE_HOST) when this host does not meet the snapshot's contract
(every reason listed), 8 (DOWNLOAD) when a package or bundle file does not match its hash
(the partial restore is undone), 5 (BAD_INPUT) for a damaged snapshot or bundle manifest,
9 (VERIFY_FAILED) when the restored env fails verification or differs from the snapshot."""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_assume_flags, add_env_flag, assume_flags, non_empty
from tfgpu_install.context import Context
from tfgpu_install.errors import UsageError
from tfgpu_install.report import Result


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="snapshot_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    ex = sub.add_parser("export", help="write a snapshot of an env (native YAML, requirements, conda, pylock)")
    add_env_flag(ex)
    ex.add_argument("-o", "--output", metavar="FILE", type=non_empty,
                    help="where to write it (native format: default the store)")
    ex.add_argument("--format", choices=("tfgpu", "requirements", "conda", "pylock"), default="tfgpu")
    ex.add_argument("--no-hashes", action="store_true", help="skip looking up package hashes on the index")
    ex.add_argument("--index-url", metavar="URL", help="the index to look hashes up on (default: as pip/uv are set)")
    re_ = sub.add_parser("restore", help="rebuild the env a snapshot describes, after checking this host")
    re_.add_argument("file", metavar="FILE", type=non_empty, help="a snapshot file or stored snapshot id")
    add_env_flag(re_)
    re_.add_argument("--offline", metavar="DIR", type=non_empty,
                     help="install only from a bundle made by `snapshot bundle`")
    re_.add_argument("--index-url", metavar="URL", help="package index (default: as pip/uv are set)")
    re_.add_argument("--allow-cpu", action="store_true", help="restore on a host without a usable GPU")
    re_.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    re_.add_argument("--dry-run", action="store_true", help="check the host and show the steps; change nothing")
    add_assume_flags(re_)
    ls = sub.add_parser("list", help="stored snapshots, oldest first")
    sh = sub.add_parser("show", help="one snapshot")
    sh.add_argument("id", metavar="ID", help="id, unique id prefix, or file")
    df = sub.add_parser("diff", help="what differs between two snapshots")
    df.add_argument("a", metavar="A")
    df.add_argument("b", metavar="B")
    bu = sub.add_parser("bundle", help="download every wheel a snapshot needs, with hashes, for offline restore")
    bu.add_argument("file", metavar="FILE", type=non_empty, help="a snapshot file or stored snapshot id")
    bu.add_argument("-o", "--output", metavar="DIR", type=non_empty, required=True, help="the bundle directory")
    bu.add_argument("--index-url", metavar="URL", help="package index (default: as pip/uv are set)")
    for sp in (ex, re_, ls, sh, df, bu):
        sp.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
        sp.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app import snapshot as snapshot_cmds
    from tfgpu_install.app.restore import BundleRequest, RestoreRequest, bundle, restore

    if args.snapshot_command == "restore":
        return restore(ctx, RestoreRequest(
            file=args.file, env=args.env, offline=args.offline, index_url=args.index_url, allow_cpu=args.allow_cpu,
            assume=assume_flags(args), yes=args.yes, dry_run=args.dry_run, progress=not args.json,
        ))
    if args.snapshot_command == "bundle":
        return bundle(ctx, BundleRequest(file=args.file, output=args.output, index_url=args.index_url))
    if args.snapshot_command == "export":
        return snapshot_cmds.export(ctx, snapshot_cmds.ExportRequest(
            env=args.env, output=args.output, format=args.format, no_hashes=args.no_hashes, index_url=args.index_url,
        ))
    if args.snapshot_command == "list":
        return snapshot_cmds.list_(ctx)
    if args.snapshot_command == "show":
        return snapshot_cmds.show(ctx, args.id)
    if args.snapshot_command == "diff":
        return snapshot_cmds.diff(ctx, args.a, args.b)
    raise UsageError("snapshot needs an action", "export, restore, list, show, diff or bundle")
