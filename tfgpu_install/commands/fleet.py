"""`tfgpu-install fleet install|status|snapshot|restore -i INVENTORY`: the same work on every host of
an Ansible inventory, run by ansible-playbook (the `fleet` extra), with a live per-host table.

Exit codes: 0 every host ok; 7 (STEP_FAILED) one or more hosts failed, were refused (a restore's
exit 12 on that host), unreachable or not finished (each one's reason is in its row); 6 ansible-core
missing; 5 a bad inventory; 4 `--same` found no release every host can run; 130 Ctrl-C (the table
still lists every host that finished)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode, UsageError
from tfgpu_install.guard import argtypes
from tfgpu_install.report import Block, Bullets, Result, Text, table

if TYPE_CHECKING:  # the fleet modules load in run(): building the parser stays light (start-up budget)
    from tfgpu_install.fleet.results import HostResult
    from tfgpu_install.fleet.run import FleetReport, FleetRequest


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="fleet_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    for name, help_text in (("install", "provision and verify every host (each its best combination)"),
                            ("status", "each host's steps and last verification (read-only)"),
                            ("snapshot", "export each host's known-good env and fetch it here"),
                            ("restore", "restore one snapshot on every host (host contract checked per host)")):
        s = sub.add_parser(name, help=help_text, description=help_text)
        # The global flags also after the action (SUPPRESS: an absent one keeps the parent's value).
        s.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document")
        s.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="traceback on errors")
        s.add_argument("-i", "--inventory", required=True, metavar="INVENTORY", help="an Ansible inventory")
        s.add_argument("--limit", metavar="PATTERN", help="only these hosts (Ansible's --limit)")
        s.add_argument("--forks", type=_count, metavar="N",
                       help="hosts worked on at once (Ansible's --forks; default: one per host, up to 64)")
        s.add_argument("--wheel", metavar="FILE", help="the tfgpu-install wheel to ship (default: built from here)")
        s.add_argument("--index-url", metavar="URL", type=argtypes.url,
                       help="the package index the nodes install from (with --serve-index: the upstream the "
                       "controller fetches from, once per file)")
        s.add_argument("--serve-index", metavar="ADDR[:PORT]",
                       help="serve a pull-through package index to the nodes from this controller, on ADDR (an "
                       "address of this machine on the fleet's network): each file is fetched upstream once")
        s.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                       help="bound on the whole run (default: the per-host bound times the waves of hosts); "
                       "hosts without a row by then read 'not finished'")
        s.add_argument("--host-timeout", type=_seconds, default=3600.0, metavar="S",
                       help="bound on one host's tfgpu-install run (default 3600)")
        if name in ("install", "restore"):
            s.add_argument("--serial", type=_count, metavar="N", help="rolling: N hosts per batch (Ansible's serial)")
            s.add_argument("--max-fail-percentage", type=_percent, metavar="P",
                           help="stop the run once more than P%% of a batch failed (default 100: never; Ansible "
                           "still stops when a whole --serial batch failed)")
            s.add_argument("--check", action="store_true", help="plan only (install --dry-run on every host)")
            s.add_argument("--allow-cpu", action="store_true", help="hosts without a usable GPU verify on the CPU")
            s.add_argument("--env", metavar="PATH", help="the env path on each host")
        if name == "install":
            s.add_argument("--profile", default="stable", help="profile name or policy file (default: stable)")
            s.add_argument("--snapshot", metavar="FILE", help="restore this snapshot instead of resolving per host")
            s.add_argument("--same", action="store_true",
                           help="one combination every host can run (the intersection), not each host's best")
        if name in ("install", "restore"):
            s.add_argument("--offline", action="store_true",
                           help="with a snapshot: build one bundle here, ship it, nodes install from it only")
        if name == "restore":
            s.add_argument("snapshot", metavar="FILE", help="the snapshot file (on this controller)")
        if name == "snapshot":
            s.add_argument("-o", "--output", metavar="DIR", type=argtypes.output, help="where the host snapshots land")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _percent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole percentage from 0 to 100")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and 1 <= value <= 30 * 86400):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 1 to 2592000 (30 days)")
    return value


def _request(args: argparse.Namespace) -> "FleetRequest":
    from tfgpu_install.fleet.run import FleetRequest

    snapshot = getattr(args, "snapshot", None)
    if getattr(args, "offline", False) and not snapshot:
        raise UsageError("--offline needs a snapshot", hint="fleet install --snapshot FILE --offline")
    if getattr(args, "same", False) and snapshot:
        raise UsageError("--same and --snapshot exclude each other", hint="a snapshot is already one combination")
    return FleetRequest(
        inventory=Path(args.inventory).expanduser(), mode=args.fleet_command, limit=args.limit, forks=args.forks,
        serial=getattr(args, "serial", None), check=bool(getattr(args, "check", False)),
        profile=getattr(args, "profile", "stable"),
        snapshot=Path(snapshot).expanduser().resolve() if snapshot else None,
        offline=bool(getattr(args, "offline", False)), same=bool(getattr(args, "same", False)),
        wheel=Path(args.wheel).expanduser().resolve() if args.wheel else None, index_url=args.index_url,
        allow_cpu=bool(getattr(args, "allow_cpu", False)), env=getattr(args, "env", None),
        fetch_dir=Path(args.output).resolve() if getattr(args, "output", None) else None, timeout_s=args.timeout,
        host_timeout_s=args.host_timeout, max_fail_percentage=getattr(args, "max_fail_percentage", None),
        serve_index=args.serve_index,
    )


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.fleet.run import FleetInterrupted, fleet_install, fleet_restore, fleet_snapshot, fleet_status
    from tfgpu_install.fleet.table import LiveTable

    by_mode = {"install": fleet_install, "status": fleet_status, "snapshot": fleet_snapshot,
               "restore": fleet_restore}
    req = _request(args)
    live = LiveTable(None if args.json else sys.stderr)
    live.start(f"fleet {req.mode}: {req.inventory}")

    def on_result(r: "HostResult") -> None:
        live.add(r)

    try:
        report = by_mode[req.mode](ctx, req, on_result)
    except FleetInterrupted as stop:  # Ctrl-C: the rows so far, the rest "not finished"; exit 130
        done = _result(stop.report)
        done.data["interrupted"] = True
        return Result(done.data, done.blocks, exit_code=int(ExitCode.INTERRUPTED))
    return _result(report)


def _result(report: "FleetReport") -> Result:
    from tfgpu_install.fleet.table import COLUMNS, rows, summary, summary_line

    counts = summary(report.hosts)
    data: dict[str, Any] = {
        "engine": report.engine, "mode": report.mode, "hosts": [h.to_json() for h in report.hosts],
        "summary": counts, "same": report.same, "playbook_rc": report.playbook_rc, "log": report.log,
        **report.extra,
    }
    blocks: list[Block] = [table(f"fleet {report.mode} ({report.engine})", COLUMNS, rows(report.hosts))]
    if report.same:
        blocks.append(Bullets("--same", tuple(report.same["explain"])))
    problems = [f"{h.name}: [{h.error}] {h.message}" + (f" -- fix: {h.hint}" if h.hint else "")
                + ("".join(f"\n      - {r}" for r in h.reasons)) for h in report.hosts if not h.ok]
    if problems:
        blocks.append(Bullets("hosts not ok", tuple(problems), "error"))
    late = [f"{h.name}: run(s) {', '.join(r[:8] for r in h.unreported['runs'])} changed it"
            + (f" ({', '.join(h.unreported['applied'])})" if h.unreported["applied"] is not None
               else " (what exactly is unknown: the run was cut off)")
            for h in report.hosts if h.unreported]
    if late:
        blocks.append(Bullets("changed by an earlier run whose result never reached this controller", tuple(late)))
    ok = all(h.ok for h in report.hosts)
    blocks.append(Text(summary_line(report.hosts) + f"; ansible log: {report.log}", "ok" if ok else "error"))
    return Result(data, blocks, exit_code=int(ExitCode.OK if ok else ExitCode.STEP_FAILED))
