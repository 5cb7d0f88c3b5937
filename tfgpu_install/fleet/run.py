"""The fleet commands' work: resolve the tools, ship the wheel, run the playbook per mode, collect
one row per host. Typed requests in, a FleetReport out; printing is the caller's (on_result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import UnsatisfiableError
from tfgpu_install.files import atomic_write
from tfgpu_install.fleet import options, reported
from tfgpu_install.fleet.inventory import read_inventory
from tfgpu_install.fleet.mirror import DEFAULT_UPSTREAM, FleetMirror, redact
from tfgpu_install.fleet.ownwheel import find_tool, own_wheel
from tfgpu_install.fleet.playbook import (
    INTERRUPTED,
    PlaybookRun,
    collections_root,
    default_forks,
    engine_version,
    playbook_env,
    run_playbook,
    run_timeout,
    site_playbook,
)
from tfgpu_install.fleet.results import HostResult, collect, parse_recap
from tfgpu_install.fleet.same import ceiling_policy_yaml, explain, next_round
from tfgpu_install.fleet.serveaddr import ServeAt, bind_address
from tfgpu_install.guard.jsondoc import JSONObject, integer, texts
from tfgpu_install.runner import TIMED_OUT

OnResult = Callable[[HostResult], None]


@dataclass(frozen=True)
class FleetRequest:
    inventory: Path
    mode: str  # install | status | snapshot | restore
    limit: Optional[str] = None
    forks: Optional[int] = None
    serial: Optional[int] = None
    check: bool = False
    profile: str = "stable"
    snapshot: Optional[Path] = None  # restore (or install --snapshot)
    offline: bool = False  # restore from a bundle the controller builds and ships
    same: bool = False
    wheel: Optional[Path] = None
    index_url: Optional[str] = None
    allow_cpu: bool = False
    env: Optional[str] = None
    fetch_dir: Optional[Path] = None  # snapshot: where the host snapshots land
    timeout_s: Optional[float] = None  # the whole run (default: from the per-host bound, hosts and forks)
    host_timeout_s: float = 3600.0  # one tfgpu-install run on one host
    max_fail_percentage: Optional[int] = None
    serve_index: Optional[ServeAt] = None  # serve a pull-through index to the nodes from here
    serve_index_any: bool = False  # a wildcard --serve-index is what the user asked for
    same_by: str = "fleet"  # --same: one combination for the fleet, or one per inventory group


class FleetInterrupted(Exception):
    """Ctrl-C during a playbook run: the report holds every row written so far (the rest: not finished)."""

    def __init__(self, report: "FleetReport") -> None:
        super().__init__("interrupted")
        self.report = report


@dataclass
class FleetReport:
    engine: str
    mode: str
    hosts: list[HostResult]
    playbook_rc: int
    log: str
    same: Optional[JSONObject] = None
    extra: JSONObject = field(default_factory=dict)


def _common_vars(req: FleetRequest, wheel: Path, index_url: Optional[str] = None) -> JSONObject:
    """The extra vars of the request's options (fleet/options.py), with what the controller resolved: the
    wheel it ships and the index the nodes use (the fleet's own, when it serves one)."""
    extra = options.extra_vars(req, req.mode)
    extra["tfgpu_wheel"] = str(wheel)
    if index_url or req.index_url:
        extra["tfgpu_index_url"] = index_url or req.index_url
    return extra


class _Fleet:
    """One command's playbook runs, sharing the tools, hosts, wheel and logs."""

    def __init__(self, ctx: Context, req: FleetRequest) -> None:
        self.ctx, self.req = ctx, req
        self.root = collections_root(ctx.environ)
        self.playbook_tool = find_tool(ctx, "ansible-playbook")
        self.env = playbook_env(self.root, ctx.environ)
        self.inventory = read_inventory(ctx.runner, find_tool(ctx, "ansible-inventory"), req.inventory, req.limit,
                                        self.env)
        self.hosts = self.inventory.hosts
        self.engine = engine_version(ctx.runner, self.playbook_tool)
        self.wheel = req.wheel or own_wheel(ctx)
        self.work = ctx.state_dir / "fleet"
        self.rc = 0
        self.forks = req.forks or default_forks(len(self.hosts))
        self.timeout_s = req.timeout_s or run_timeout(req.host_timeout_s, len(self.hosts), self.forks, req.serial)
        self.mirror: Optional[FleetMirror] = None
        self.index_url = req.index_url
        if req.serve_index is not None:
            bind = bind_address(req.serve_index, req.serve_index_any, self.inventory.addresses)
            self.mirror = FleetMirror(req.index_url or DEFAULT_UPSTREAM, ctx.cache_dir / "fleet-mirror", bind,
                                      req.serve_index.port, forks=self.forks, environ=ctx.environ)
            self.index_url = self.mirror.start()

    def __enter__(self) -> "_Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.mirror is not None:
            self.mirror.stop()

    def common_vars(self) -> JSONObject:
        return _common_vars(self.req, self.wheel, self.index_url)

    def play(self, mode: str, extra: JSONObject, on_result: OnResult, check: bool, tag: str) -> list[HostResult]:
        results_dir = self.work / "results" / tag
        acknowledges = mode in ("install", "restore") and not check
        if acknowledges:
            seen = reported.load(self.ctx.state_dir)
            extra = {**extra, "tfgpu_run_id": reported.new_run_id(),
                     "tfgpu_reported_runs": {h: seen[h] for h in self.hosts if h in seen}}
        run = PlaybookRun(self.req.inventory, mode, results_dir, extra, self.req.limit, self.forks,
                          self.req.serial, check, self.timeout_s, self.req.max_fail_percentage)
        done = run_playbook(self.ctx.runner, self.playbook_tool, site_playbook(self.root), run, self.env,
                            self.hosts, on_result)
        atomic_write(self.log(tag), done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr else ""))
        self.rc = done.returncode
        stopped = f"the whole run reached its bound ({self.timeout_s:.0f} s, --timeout) and was stopped" \
            if done.returncode == TIMED_OUT else None
        if done.returncode == INTERRUPTED:
            stopped = "the run was interrupted (Ctrl-C) before this host finished"
        rows = collect(results_dir, self.hosts, parse_recap(done.stdout), stopped)
        if acknowledges:
            reported.record(self.ctx.state_dir, ((r.name, r.ledger_run) for r in rows))
        if done.returncode == INTERRUPTED:
            raise FleetInterrupted(self.report(mode, rows, tag))
        return rows

    def log(self, tag: str) -> Path:
        return self.work / f"{tag}-playbook.log"

    def report(self, mode: str, hosts: list[HostResult], tag: str, **kw: Any) -> FleetReport:
        extra = dict(kw.pop("extra", {}))
        if self.mirror is not None:
            extra["mirror"] = {"url": redact(self.index_url or ""), "upstream": self.mirror.shown_upstream,
                              **self.mirror.stats.to_json()}
        return FleetReport(self.engine, mode, hosts, self.rc, str(self.log(tag)), extra=extra, **kw)


def fleet_install(ctx: Context, req: FleetRequest, on_result: OnResult) -> FleetReport:
    if req.snapshot is not None:
        return fleet_restore(ctx, req, on_result)
    with _Fleet(ctx, req) as f:
        extra = f.common_vars()
        same: Optional[JSONObject] = None
        if req.same:
            profiles, same = _same_profiles(f, req, extra)
            if req.same_by == "fleet":
                extra["tfgpu_profile"] = next(iter(profiles.values()))
            else:
                extra["tfgpu_profiles"] = profiles  # host -> its group's profile (the role reads it per host)
        hosts = f.play("install", extra, on_result, req.check, "install")
        return f.report("install", hosts, "install", same=same)


@dataclass
class _Group:
    """One --same unit's planning state: the hosts, the profile of the next round, what was learned."""

    name: str
    hosts: list[str]
    profile: str
    first: Optional[dict[str, Optional[str]]] = None
    limited_by: tuple[str, ...] = ()
    unanswered: dict[str, str] = field(default_factory=dict)
    result: Optional[JSONObject] = None


def _units(f: _Fleet, req: FleetRequest) -> list[_Group]:
    if req.same_by == "fleet":
        return [_Group("fleet", list(f.hosts), req.profile)]
    by: dict[str, list[str]] = {}
    for h in f.hosts:
        by.setdefault(f.inventory.groups.get(h, "ungrouped"), []).append(h)
    return [_Group(g, hosts, req.profile) for g, hosts in by.items()]


def _same_profiles(f: _Fleet, req: FleetRequest, extra: JSONObject) -> tuple[dict[str, str], JSONObject]:
    """Plan (check mode) on every host under a falling ceiling per unit (the fleet, or each inventory group)
    until every host of a unit picks one release. -> host -> profile, and what --same reports."""
    from tfgpu_install.knowledge.load import knowledge_dir, load_knowledge, load_policy

    knowledge = load_knowledge(knowledge_dir(f.ctx), cache_dir=f.ctx.cache_dir)
    policy = load_policy(req.profile, knowledge)
    units = _units(f, req)
    for round_no in range(len(f.hosts) + 1):
        open_units = [u for u in units if u.result is None]
        if not open_units:
            break
        # A real run bootstraps the tool and plans (install --dry-run, the env untouched); --check plans
        # with the tools already there and writes nothing. Settled units are planned again (cheap) as well.
        profiles = {h: u.profile for u in units for h in u.hosts}
        planned = f.play("install", {**extra, "tfgpu_profile": req.profile, "tfgpu_profiles": profiles,
                                     "tfgpu_install_mode": "plan"}, lambda r: None, req.check, f"same-{round_no}")
        by_name = {r.name: r for r in planned}
        for i, unit in enumerate(open_units):
            ceiling = _settle(unit, [by_name[h] for h in unit.hosts if h in by_name], round_no)
            if ceiling is not None:
                path = f.work / ("same-profile.yaml" if req.same_by == "fleet" else f"same-profile-{i}.yaml")
                atomic_write(path, ceiling_policy_yaml(policy, ceiling))
                unit.profile = str(path)
    if any(u.result is None for u in units):
        raise UnsatisfiableError("the hosts did not settle on one release", hint="drop --same, or --limit the fleet")
    profiles = {h: u.profile for u in units for h in u.hosts}
    if req.same_by == "fleet":
        return profiles, dict(units[0].result or {})
    lines = [f"{u.name}: {line}" for u in units for line in texts(u.result or {}, "explain")]
    return profiles, {"by": "group", "groups": {u.name: u.result for u in units}, "explain": lines,
                      "rounds": max(integer(u.result or {}, "rounds") or 0 for u in units)}


def _settle(unit: _Group, planned: list[HostResult], round_no: int) -> Optional[str]:
    """One round's answers for one unit: settles it (unit.result), or -> the next round's ceiling."""
    what = "every host" if unit.name == "fleet" else f"every host of group {unit.name}"
    # The common release is computed over the hosts that answered; the rest are listed with their errors
    # (and get their own row in the install that follows).
    for r in planned:
        if not r.ok:
            unit.unanswered.setdefault(r.name, f"[{r.error}] {r.message}")
    answered = {r.name: r.tensorflow for r in planned if r.ok and r.name not in unit.unanswered}
    if not answered:
        raise UnsatisfiableError(f"no host of {unit.name} answered the --same planning round: " + "; ".join(
            f"{h}: {e}" for h, e in unit.unanswered.items()), hint="fix the hosts' errors, or drop --same")
    unit.first = unit.first or answered
    step = next_round(answered)
    if step.common is not None:
        unit.limited_by = unit.limited_by or step.limited_by
        lines = explain(step.common, unit.first, unit.limited_by)
        lines += [f"{h} did not answer (not counted): {e}" for h, e in unit.unanswered.items()]
        unit.result = {"tensorflow": step.common, "profile": unit.profile, "explain": lines, "rounds": round_no + 1,
                       "answered": sorted(answered), "unanswered": unit.unanswered}
        return None
    if step.ceiling is None:
        raise UnsatisfiableError(
            f"no TensorFlow release fits {what}: " + ", ".join(step.missing) + " can run none under the "
            "common ceiling", hint="drop --same (each host gets its own best), --same-by group, or --limit the fleet")
    unit.limited_by = step.limited_by
    return step.ceiling


def fleet_status(ctx: Context, req: FleetRequest, on_result: OnResult) -> FleetReport:
    with _Fleet(ctx, req) as f:
        hosts = f.play("status", f.common_vars(), on_result, False, "status")
        return f.report("status", hosts, "status")


def fleet_snapshot(ctx: Context, req: FleetRequest, on_result: OnResult) -> FleetReport:
    with _Fleet(ctx, req) as f:
        fetch_dir = req.fetch_dir or (f.work / "snapshots")
        extra = {**f.common_vars(), "tfgpu_fetch_dir": str(fetch_dir)}
        hosts = f.play("snapshot", extra, on_result, req.check, "snapshot")
        files = {r.name: str(fetch_dir / f"{r.name}.tfgpu.yaml") for r in hosts if r.ok}
        return f.report("snapshot", hosts, "snapshot", extra={"snapshots": files})


def fleet_restore(ctx: Context, req: FleetRequest, on_result: OnResult) -> FleetReport:
    assert req.snapshot is not None
    with _Fleet(ctx, req) as f:
        extra = {**f.common_vars(), "tfgpu_snapshot_file": str(req.snapshot)}
        if req.offline:
            extra["tfgpu_bundle_dir"] = str(_bundle(f, req))
        hosts = f.play("restore", extra, on_result, req.check, "restore")
        return f.report("restore", hosts, "restore", extra={"snapshot": str(req.snapshot), "offline": req.offline})


def _bundle(f: _Fleet, req: FleetRequest) -> Path:
    """One bundle for the whole fleet, built here (`snapshot bundle`) and shipped to every node."""
    from tfgpu_install.snapshot.bundle import make
    from tfgpu_install.snapshot.model import find

    assert req.snapshot is not None
    out = f.work / "bundle"
    make(f.ctx, find(f.ctx.state_dir, str(req.snapshot))[1], out, index_url=req.index_url)
    return out
