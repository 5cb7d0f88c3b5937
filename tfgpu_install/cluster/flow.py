"""`tfgpu-install cluster slurm`: a verified env per node type of a Slurm cluster, placed by the scheduler.

sinfo -> node types -> (with --same: plan jobs per type until the types settle on one release) -> one job
per type (bootstrap the tool on the shared path with the type's own Python, install or restore the env for
that type on the shared path, verify it) -> wait for the jobs, bounded -> one row per type: verified (GPU or
CPU only, the layers that passed), refused, failed, or pending/running with the scheduler's reason.
Answers are read from results/<key>/<type>/<job id>.*: a job Slurm ran twice counts once. A job of this
key and type still in the queue from an earlier run is waited for, not submitted again."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Optional, Sequence

from tfgpu_install.cluster import jobs, modulefile, slurm
from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, EnvironmentProblem, UnsatisfiableError
from tfgpu_install.files import atomic_write
from tfgpu_install.fleet.ownwheel import own_wheel
from tfgpu_install.fleet.same import ceiling_policy_yaml, explain, next_round

POLL_S = 2.0
SLURM_TIMEOUT_S = 60
_NOT_QUEUED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
               "BOOT_FAIL", "DEADLINE")


@dataclass(frozen=True)
class SlurmRequest:
    shared: Path
    profile: str = "stable"
    snapshot: Optional[Path] = None
    same: bool = False
    wheel: Optional[Path] = None
    index_url: Optional[str] = None
    allow_cpu: bool = False
    partition: Optional[str] = None
    only_types: tuple[str, ...] = ()
    job_prefix: tuple[str, ...] = ()
    job_env: tuple[tuple[str, str], ...] = ()
    python: str = "python3"
    wait_s: float = 1800.0  # how long a job may stay pending before its type is reported pending
    job_timeout_s: float = 3600.0  # a started job's bound (its --time, and how long we wait for it)
    gpus: int = 1
    modulefiles: Optional[Path] = None
    module_format: str = "lua"


@dataclass(frozen=True)
class RunEntry:
    """One run of a job, from the answers it left (Slurm runs a requeued job again under the same id)."""

    run: Optional[int]  # 1 = the first (SLURM_RESTART_COUNT + 1); None: not said
    node: Optional[str]
    finished: bool
    changed: Optional[bool]  # what its install said; None: it did not say
    install_rc: Optional[int]
    verify_rc: Optional[int]


@dataclass
class TypeRow:
    type: str
    nodes: list[str]
    partitions: list[str]
    features: list[str]
    gpu: Optional[str]
    state: str  # verified | failed | refused | pending | running | unknown
    ok: bool = False
    changed: bool = False
    job_id: Optional[str] = None
    host: Optional[str] = None
    runs: int = 0  # how many times Slurm started this job (a requeue runs it again: counted once)
    jobs_counted: int = 0  # distinct jobs with answers for this key and type
    reason: Optional[str] = None
    tensorflow: Optional[str] = None
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    python: Optional[str] = None
    verified: Optional[bool] = None
    gpu_verified: Optional[bool] = None
    layers_passed: list[str] = field(default_factory=list)
    env: Optional[str] = None
    modulefile: Optional[str] = None
    unusable_nodes: dict[str, str] = field(default_factory=dict)
    # Each run of the job whose answers are known, oldest first (more than one: Slurm requeued it).
    job_runs: list[RunEntry] = field(default_factory=list)
    job_states: list[str] = field(default_factory=list)  # what squeue said of the job while we waited, in order

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"job_runs": [asdict(r) for r in self.job_runs]}


@dataclass
class ClusterReport:
    scheduler: str
    key: str
    shared: str
    types: list[TypeRow]
    same: Optional[dict[str, Any]] = None
    submitted: list[str] = field(default_factory=list)


OnRow = Callable[[TypeRow], None]
_MAX_STATES = 24  # job_states kept per job (a job requeued in a loop must not grow the row without bound)


def keep_waiting(queued: Mapping[str, slurm.JobState], started: Collection[str], now: float, deadline: float,
                 cap: float) -> bool:
    """Poll again? While a job is queued, up to `cap`; past `deadline` (how long a job may stay pending) only
    for a job that has started: running, or pending again because Slurm requeued it after it started (a lost
    node: it runs again, and its answers are what the row is about)."""
    if not queued or now >= cap:
        return False
    return now < deadline or any(s.state != "PENDING" or job in started for job, s in queued.items())


def seen(states: list[str], state: slurm.JobState) -> None:
    """Add what squeue said of a job to what was seen of it, when it differs from the last entry; bounded."""
    now = state.describe()
    if (not states or states[-1] != now) and len(states) < _MAX_STATES:
        states.append(now)


class _Slurm:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        for tool in ("sinfo", "sbatch", "squeue", "scontrol"):
            if not ctx.runner.which(tool):
                raise EnvironmentProblem(f"{tool} is not installed here (Slurm's client commands)",
                                         hint="run this on a login node of the cluster (Debian/Ubuntu: "
                                         "apt-get install slurm-client), with SLURM_CONF set if the cluster needs it")

    def run(self, argv: list[str], what: str, mutating: bool = False) -> str:
        done = self.ctx.runner.run(argv, desc=what, timeout=SLURM_TIMEOUT_S, mutating=mutating)
        if not done.ok:
            raise EnvironmentProblem(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}",
                                     hint="check that the cluster answers: `sinfo` and `squeue` on this node")
        return done.stdout

    def types(self, req: SlurmRequest) -> list[slurm.NodeType]:
        found = slurm.node_types(slurm.parse_sinfo(self.run(list(slurm.SINFO_ARGV), "sinfo")), req.partition)
        if req.only_types:
            unknown = sorted(set(req.only_types) - {t.name for t in found})
            if unknown:
                raise BadInputError(f"no node type {', '.join(unknown)} in this cluster",
                                    hint="the types are: " + ", ".join(t.name for t in found))
            found = [t for t in found if t.name in req.only_types]
        if not found:
            raise BadInputError("sinfo lists no nodes" + (f" in partition {req.partition}" if req.partition else ""),
                                hint="check the partition name (`sinfo -s`)")
        return found

    def submit(self, argv: list[str]) -> str:
        job = slurm.parse_job_id(self.run(argv, "sbatch", mutating=True))
        if job is None:
            raise EnvironmentProblem("sbatch gave no job id", hint="check `sbatch --parsable` on this node")
        return job

    def queue(self, ids: list[str]) -> dict[str, slurm.JobState]:
        if not ids:
            return {}
        done = self.ctx.runner.run(["squeue", "-h", "-j", ",".join(ids), "-o", slurm.SQUEUE_FORMAT],
                                   desc="squeue", timeout=SLURM_TIMEOUT_S)
        # squeue exits non-zero when every id has left the queue ("Invalid job id"): none queued.
        return slurm.parse_squeue(done.stdout) if done.ok else {}

    def final(self, job: str) -> Optional[slurm.JobState]:
        done = self.ctx.runner.run(["scontrol", "show", "job", job], desc="scontrol show job",
                                   timeout=SLURM_TIMEOUT_S)
        return slurm.parse_scontrol_job(done.stdout) if done.ok else None


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _place(src: Path, shared: Path, sub: str) -> tuple[Path, str]:
    """A copy of a controller file on the shared path, named by its content; -> (path, sha256)."""
    try:
        sha = _sha(src)
    except OSError as exc:
        raise BadInputError(f"{src} cannot be read ({exc.strerror or exc})", hint="give a readable file") from exc
    dest = shared / sub / sha[:16] / src.name
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dest)
    return dest, sha


def _check_shared(shared: Path) -> None:
    if not shared.is_dir():
        raise BadInputError(f"the shared path {shared} is not a directory",
                            hint="give --shared a directory every node mounts at the same path")
    probe = shared / f".tfgpu-write-probe-{time.time_ns()}"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write under {shared}: {exc.strerror or exc}",
                                 hint="give --shared a directory this user can write") from exc


class _Cluster:
    def __init__(self, ctx: Context, req: SlurmRequest) -> None:
        _check_shared(req.shared)
        self.ctx, self.req = ctx, req
        self.slurm = _Slurm(ctx)
        self.types = self.slurm.types(req)
        self.wheel, sha = _place(req.wheel or own_wheel(ctx), req.shared, "wheels")
        self.wheel_tag = sha[:12]
        self.snapshot: Optional[Path] = None
        if req.snapshot is not None:
            self.snapshot, snap_sha = _place(req.snapshot, req.shared, "snapshots")
            self.base_key = f"snapshot-{snap_sha[:12]}"
        else:
            self.base_key = "profile-" + hashlib.sha256(self._profile_text(req.profile).encode()).hexdigest()[:12]
        self.submitted: list[str] = []
        self.started: set[str] = set()  # jobs seen running (or past it): a requeued one is still waited for
        # A job still queued from an earlier run, reused: its restart count then. Its runs before that count
        # were that earlier run's to report (what they changed is not this run's doing).
        self.reused: dict[str, int] = {}
        self.states: dict[str, list[str]] = {}  # job -> what squeue said of it, in order

    def _profile_text(self, profile: str) -> str:
        path = Path(profile)
        if profile.endswith((".yaml", ".yml")):
            try:
                return path.read_text()
            except OSError as exc:
                raise BadInputError(f"the profile {profile} cannot be read", hint="give a profile name or a "
                                    "policy file on the shared path") from exc
        return profile

    def spec(self, t: slurm.NodeType, mode: str, key: str, profile: Optional[str]) -> jobs.JobSpec:
        return jobs.JobSpec(mode, self.req.shared, key, t.name, self.wheel, self.wheel_tag, self.req.index_url,
                            profile=profile, snapshot=self.snapshot, allow_cpu=self.req.allow_cpu,
                            python=self.req.python, env_vars=dict(self.req.job_env))

    def launch(self, t: slurm.NodeType, spec: jobs.JobSpec) -> str:
        """The job for (key, type): one still queued from an earlier run is reused, else a new one."""
        res = spec.results
        res.mkdir(parents=True, exist_ok=True)
        queued = res / "queued"
        try:
            earlier = queued.read_text().strip()
        except OSError:
            earlier = ""
        if earlier.isdigit() and self.slurm.queue([earlier]).get(earlier):
            now = self.slurm.final(earlier)
            self.reused[earlier] = (now.restarts or 0) if now is not None else 0
            return earlier
        jobdir = self.req.shared / "jobs" / spec.key
        jobdir.mkdir(parents=True, exist_ok=True)
        inner = jobdir / f"{t.name}.{spec.mode}.sh"
        atomic_write(inner, jobs.script(spec))
        run = inner
        if self.req.job_prefix:
            run = jobdir / f"{t.name}.{spec.mode}.wrap.sh"
            atomic_write(run, jobs.wrapper(inner, self.req.job_prefix))
        argv = slurm.sbatch_argv(t, str(run), f"tfgpu-{spec.mode}-{t.name}", str(res / "slurm-%j.out"),
                                 gpus=self.req.gpus if t.gpus_per_node else 0, partition=self.req.partition,
                                 time_limit=str(max(1, int(self.req.job_timeout_s // 60))))
        job = self.slurm.submit(argv)
        atomic_write(queued, job + "\n")
        self.submitted.append(job)
        return job

    def wait(self, launched: dict[str, str], deadline: float) -> dict[str, slurm.JobState]:
        """Poll until every job has left the queue, or only jobs that never started are left past the deadline
        (a started job is waited for up to its own bound, also when Slurm requeued it); -> the jobs still
        queued, with state and reason."""
        cap = deadline + self.req.job_timeout_s + 60
        while True:
            queued = self.slurm.queue(sorted(set(launched.values())))
            for job, state in queued.items():
                seen(self.states.setdefault(job, []), state)
                if state.state != "PENDING":
                    self.started.add(job)
            queued = {j: s for j, s in queued.items() if s.state not in _NOT_QUEUED}
            if not keep_waiting(queued, self.started, time.monotonic(), deadline, cap):
                return queued
            time.sleep(POLL_S)

    def round(self, mode: str, key: str, profile: Optional[str]) -> list[TypeRow]:
        specs = {t.name: self.spec(t, mode, key, profile) for t in self.types}
        launched = {t.name: self.launch(t, specs[t.name]) for t in self.types}
        # --wait counts from this round's submission: with --same, plan rounds come first.
        queued = self.wait(launched, time.monotonic() + self.req.wait_s)
        return [self.row(t, specs[t.name], launched[t.name], queued.get(launched[t.name])) for t in self.types]

    def row(self, t: slurm.NodeType, spec: jobs.JobSpec, job: str, queued: Optional[slurm.JobState]) -> TypeRow:
        row = TypeRow(t.name, list(t.nodes), list(t.partitions), list(t.features), t.gpu_type, "unknown",
                      job_id=job, unusable_nodes=dict(t.down), env=str(spec.env))
        row.jobs_counted = len(jobs.jobs_in(spec.results))
        row.job_states = list(self.states.get(job, []))
        if queued is not None:
            row.state = "pending" if queued.state == "PENDING" else "running"
            row.reason = queued.reason or queued.state
            if queued.state == "PENDING" and job in self.started:
                row.reason = f"requeued by Slurm after it started ({row.reason})"
            return row
        runs = jobs.read_runs(spec.results, job)
        any_changed, row.job_runs, note = runs_summary(job, runs, since=self.reused.get(job, 0))
        got = runs[-1]
        if not got.finished:
            final = self.slurm.final(job)
            row.state = "failed"
            row.reason = ("the job ended without its answers: " + (f"{final.state}" + (
                f" ({final.reason})" if final.reason else "") if final else "no record left in Slurm")
                + "; its output: " + str(spec.results / f"slurm-{job}.out"))
            return row
        row.host, row.runs = got.host, (got.restarts or 0) + 1
        _fill(row, got, spec)
        # A rerun finds in place the env its earlier run built: the job changed it all the same.
        row.changed = row.changed or any_changed
        if note is not None and row.state == "verified":
            row.reason = note
        return row


def runs_summary(job: str, runs: Sequence[jobs.JobResult],
                 since: int = 0) -> tuple[bool, list[RunEntry], Optional[str]]:
    """What the runs of one job say together (oldest first, the latest last): did any run from restart count
    `since` on change the env (a job reused from an earlier `cluster slurm`: its earlier runs were reported
    there), one entry per run that left answers (run number, node, finished, changed, exit codes), and for a
    job Slurm ran more than once, a line that says so (the row's reason)."""
    known = [r for r in runs if r.finished or r.restarts is not None]
    entries = [RunEntry((r.restarts + 1) if r.restarts is not None else None, r.node or r.host, r.finished,
                        r.changed, r.install_rc, r.verify_rc) for r in known]
    changed = any(r.changed is True for r in known if r.restarts is None or r.restarts >= since)
    last = runs[-1] if runs else None
    times = (last.restarts or 0) + 1 if last is not None else 0
    if times < 2:
        return changed, entries, None
    parts = []
    for r in known:
        what = "finished" if r.finished else "did not finish"
        parts.append(f"run {(r.restarts + 1) if r.restarts is not None else '?'} on {r.node or r.host or '?'} {what}"
                     + (", changed the env" if r.changed else ""))
    return changed, entries, (f"requeued by Slurm: job {job} ran {times} times ({'; '.join(parts)}); its answers "
                              "count once")


def _str(value: Any) -> Optional[str]:
    return value[:64] if isinstance(value, str) else None


def _fill(row: TypeRow, got: jobs.JobResult, spec: jobs.JobSpec) -> None:
    """The row from what the job wrote (typed and bounded: another machine's word)."""
    doc = got.install
    choice = ((doc.get("resolution") or {}) if isinstance(doc.get("resolution"), dict) else {}).get("choice")
    choice = choice if isinstance(choice, dict) else {}
    row.tensorflow, row.cuda, row.cudnn, row.python = (_str(choice.get(k)) for k in
                                                       ("tensorflow", "cuda", "cudnn", "python"))
    row.changed = doc.get("changed") is True
    if got.tool_rc:
        row.state, row.reason = "failed", "the tool could not be installed on the node: " + jobs.tail(
            spec.results / f"{got.job_id}.bootstrap.log")
        return
    if got.install_rc != 0:
        message = doc.get("message") if isinstance(doc.get("message"), str) else None
        row.state = "refused" if got.install_rc == 12 else "failed"
        row.reason = f"exit {got.install_rc}: " + (message or jobs.tail(spec.results / f"{got.job_id}.install.log"))
        return
    if spec.mode == "plan":
        row.state, row.ok = "planned", True
        return
    v = got.verify
    ok = got.verify_rc == 0 and v.get("ok") is True
    row.verified = ok
    row.gpu_verified = (v.get("gpu_verified") is True) if ok else None
    raw = v.get("layers")
    layers: list[Any] = raw if isinstance(raw, list) else []
    row.layers_passed = [lay["name"][:40] for lay in layers if isinstance(lay, dict) and lay.get("status") == "pass"
                         and isinstance(lay.get("name"), str)] if ok else []
    row.state, row.ok = ("verified", True) if ok else ("failed", False)
    if not ok:
        row.reason = f"verification exit {got.verify_rc}: " + jobs.tail(spec.results / f"{got.job_id}.verify.log")


def _same(c: _Cluster) -> tuple[str, dict[str, Any]]:
    """--same over node types: plan jobs per type under a falling ceiling until every type picks one release."""
    from tfgpu_install.knowledge.load import knowledge_dir, load_knowledge, load_policy

    policy = load_policy(c.req.profile, load_knowledge(knowledge_dir(c.ctx), cache_dir=c.ctx.cache_dir))
    profile, first = c.req.profile, None
    limited: tuple[str, ...] = ()
    for n in range(len(c.types) + 1):
        key = f"{c.base_key}-plan-{hashlib.sha256(c._profile_text(profile).encode()).hexdigest()[:8]}"
        rows = c.round("plan", key, profile)
        missing = [r for r in rows if not r.ok]
        if missing:
            raise UnsatisfiableError("--same: these node types could not plan: " + "; ".join(
                f"{r.type}: {r.state} ({r.reason})" for r in missing), hint="fix those types, or drop --same")
        answered = {r.type: r.tensorflow for r in rows}
        first = first or answered
        step = next_round(answered)
        if step.common is not None:
            lines = explain(step.common, first, limited or step.limited_by)
            return profile, {"tensorflow": step.common, "profile": profile, "explain": lines, "rounds": n + 1}
        if step.ceiling is None:
            raise UnsatisfiableError("no TensorFlow release fits every node type: " + ", ".join(step.missing),
                                     hint="drop --same (each type gets its own best)")
        limited = step.limited_by
        path = c.req.shared / "profiles" / f"same-{step.ceiling}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, ceiling_policy_yaml(policy, step.ceiling))
        profile = str(path)
    raise UnsatisfiableError("the node types did not settle on one release", hint="drop --same")


def cluster_slurm(ctx: Context, req: SlurmRequest, on_row: OnRow) -> ClusterReport:
    c = _Cluster(ctx, req)
    same: Optional[dict[str, Any]] = None
    profile: Optional[str] = req.profile
    mode = "restore" if req.snapshot is not None else "install"
    key = c.base_key
    if req.same and mode == "install":
        profile, same = _same(c)
        key = f"{c.base_key}-same-{hashlib.sha256(c._profile_text(profile).encode()).hexdigest()[:8]}"
    rows = c.round(mode, key, profile)
    for row in rows:
        if req.modulefiles is not None and row.state == "verified":
            row.modulefile = str(_modulefile(req, row))
        on_row(row)
    summary = {"key": key, "rows": [r.to_json() for r in rows]}
    atomic_write(req.shared / "results" / key / "last-run.json", json.dumps(summary, indent=1) + "\n")
    return ClusterReport("slurm", key, str(req.shared), rows, same, c.submitted)


def _modulefile(req: SlurmRequest, row: TypeRow) -> Path:
    assert req.modulefiles is not None and row.env is not None
    how = "GPU" if row.gpu_verified else "CPU only"
    what = (f"TensorFlow {row.tensorflow} (CUDA {row.cuda}, cuDNN {row.cudnn}) for node type {row.type}, "
            f"verified ({how}) by Slurm job {row.job_id}")
    path = req.modulefiles / "tfgpu" / modulefile.file_name(req.module_format, row.type)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, modulefile.render(req.module_format, Path(row.env), what))
    return path
