"""`tfgpu-install fleet install|status|snapshot|restore -i INVENTORY`: the same work on every host of
an Ansible inventory, run by ansible-playbook (the `fleet` extra), with a live per-host table.

Exit codes: 0 every host ok; 7 (STEP_FAILED) one or more hosts failed, were refused (a restore's
exit 12 on that host), unreachable or not finished (each one's reason is in its row); 6 ansible-core
missing; 5 a bad inventory; 4 `--same` found no release every host can run; 130 Ctrl-C (the table
still lists every host that finished)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode, UsageError
from tfgpu_install.guard.jsondoc import texts
from tfgpu_install.report import Block, Bullets, Result, Text, table

if TYPE_CHECKING:  # the fleet modules load in run(): building the parser stays light (start-up budget)
    from tfgpu_install.app.fleet import FleetRun
    from tfgpu_install.fleet.results import HostResult
    from tfgpu_install.fleet.run import FleetReport, FleetRequest


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tfgpu_install.fleet import options

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
        options.add_to(s, name)  # every fleet option is one row of fleet/options.py


def _request(args: argparse.Namespace) -> "FleetRequest":
    from tfgpu_install.fleet import options
    from tfgpu_install.fleet.run import FleetRequest

    fields = options.request_fields(args, args.fleet_command)
    snapshot = fields.get("snapshot")
    if fields.get("offline") and not snapshot:
        raise UsageError("--offline needs a snapshot", hint="fleet install --snapshot FILE --offline")
    if fields.get("same") and snapshot:
        raise UsageError("--same and --snapshot exclude each other", hint="a snapshot is already one combination")
    if fields.get("same_by", "fleet") != "fleet" and not fields.get("same"):
        raise UsageError("--same-by needs --same", hint="fleet install --same --same-by group")
    serve = fields.get("serve_index")
    if serve is not None and serve.wildcard and not fields.get("serve_index_any"):
        raise UsageError(f"--serve-index {serve.host or '(empty)'}:{serve.port} would listen on every interface",
                         hint="give the address the nodes reach this controller on (or `auto`); add "
                         "--serve-index-any if every interface is what you want", ref="serve-index")
    return FleetRequest(mode=args.fleet_command, **fields)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.fleet import fleet
    from tfgpu_install.fleet.table import LiveTable

    req = _request(args)
    live = LiveTable(None if args.json else sys.stderr)
    live.start(f"fleet {req.mode}: {req.inventory}")

    def on_result(r: "HostResult") -> None:
        live.add(r)

    return render(fleet(ctx, req, on_result))


def render(done: "FleetRun") -> Result:
    shown = _result(done.report)
    if not done.interrupted:
        return shown
    # Ctrl-C: the rows so far, the rest "not finished"; exit 130
    shown.data["interrupted"] = True
    return Result(shown.data, shown.blocks, exit_code=int(ExitCode.INTERRUPTED))


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
        blocks.append(Bullets("--same", tuple(texts(report.same, "explain"))))
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
