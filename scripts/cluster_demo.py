"""scripts/cluster-demo --slurm [--json] [--keep]: a real Slurm cluster on this one machine, driven by
`tfgpu-install cluster slurm`.

Debian's slurm-wlm and munge: one slurmctld (this machine's network namespace, on a private bridge
10.254.78.0/24) and one slurmd per node, each in its own network namespace (started with `nsenter --net`,
not `ip netns exec`, whose /sys remount breaks slurmd's plugins) and its own mount namespace, where the
node's own root filesystem (a debootstrapped Debian 12 or 11 tree under an overlay, the fleet demo's)
sits at one fixed path: jobs enter it with `--job-prefix 'chroot PATH'`, so each type runs its own glibc and
Python. Fake GPUs are character devices in gres.conf (AutoDetect=off); node types are features + GRES type:

  a100  a1, a2   Debian 12   gpu:a100:2   partition gpu        (a2's slurmd is killed: the type runs on a1)
  t4    t1       Debian 12   gpu:t4:1     partition inference  (its GPU held by another job: pending)
  v100  o1       Debian 11   gpu:v100:1   partition gpu        (glibc 2.31, Python 3.9: another release)

Runs: `cluster slurm` (a100 and v100 verified on the CPU, said so; t4 pending with the scheduler's reason);
then the a100 job is requeued (Slurm runs it twice, same id) and `cluster slurm` runs again: nothing changes,
the requeued job is waited for and counted once. Then `cluster slurm --same --partition gpu` (one release for
a100 and v100: v100's Debian 11 pulls a100 down to 2.98.0) with a network partition: while v100's job runs
(its tool stopped at the test suite's stop seam, so no fast job can race it), o1's namespace drops slurmd's
traffic to and from slurmctld (iptables); Slurm marks o1 down and requeues the job; the stopped run finishes
unseen behind the partition; the partition heals, o1 returns, Slurm runs the job again under the same id;
the row counts it once and says so. A second `--same` run changes nothing. Prints one JSON document. Torn
down in a finally block. Needs root, ip, unshare, nsenter, iptables, slurm-wlm, munge, debootstrap."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import fleet_demo as fd  # noqa: E402 (the fleet demo's roots, index and helpers)

from tests.support.faults import stopped_at_seam  # noqa: E402 (the stop seam's stopped processes)

SUBNET = "10.254.78"
BRIDGE = "tfgpucd0"
CTL_IP = f"{SUBNET}.1"
NODE_ROOT = Path("/var/tmp/tfgpu-cluster-node-root")  # the same path in every node's mount namespace
CTL_PORT, NODE_PORT = 6917, 6918
SLURMD_TIMEOUT_S = 10  # a node silent this long is marked down (its jobs requeued): the partition case waits on it
CRED_EXPIRE_S = 20  # also how long a requeued job waits before it runs again (Slurm's default: 120 s)
# name, type, ip suffix, rootfs release, gpus, partition
NODES = (("a1", "a100", 11, "bookworm", 2, "gpu"), ("a2", "a100", 12, "bookworm", 2, "gpu"),
         ("t1", "t4", 13, "bookworm", 1, "inference"), ("o1", "v100", 14, "bullseye", 1, "gpu"))
KILLED, BUSY_TYPE = "a2", "t4"
# The partition case: v100's only node loses slurmctld while its job runs. The job's tool stops itself at the
# test suite's stop seam (tests/support/faultsite, armed through the job's environment) in the middle of its
# install's verification step, so the partition always lands while the job runs, however fast it would be.
PARTITIONED, PARTITIONED_TYPE, STOP_AT = "o1", "v100", "verify.run:middle"
# What the partition drops in the node's namespace: slurmctld -> slurmd and slurmd -> slurmctld (the shared
# directory and the package index stay reachable: the job can finish unseen).
CUT = (("INPUT", "-p", "tcp", "--dport", str(NODE_PORT)), ("OUTPUT", "-p", "tcp", "--dport", str(CTL_PORT)))
STEP_TIMEOUT_S = 1800
sh = fd.sh


def log(msg: str) -> None:
    sys.stderr.write(f"[cluster-demo] {msg}\n")
    sys.stderr.flush()


def why_not() -> Optional[str]:
    reason = fd.why_not()
    if reason:
        return reason
    for tool in ("nsenter", "slurmctld", "slurmd", "munged", "sbatch", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install slurm-wlm munge iptables)"
    return None


class Cluster:
    def __init__(self, work: Path, roots: dict[str, Path]) -> None:
        self.work, self.roots = work, roots
        self.tag = f"cd{os.getpid() % 100000}"
        self.conf = work / "etc" / "slurm.conf"
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.bridge = False
        self.shared = work / "shared"

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def write_config(self) -> None:
        etc = self.work / "etc"
        for d in (etc, self.work / "state", self.work / "dev", self.work / "munge", self.shared):
            d.mkdir(parents=True, exist_ok=True)
        (self.work / "munge").chmod(0o700)
        key = self.work / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        w = self.work
        lines = [
            "ClusterName=tfgpudemo", f"SlurmctldHost={socket.gethostname().split('.')[0]}({CTL_IP})",
            f"SlurmctldPort={CTL_PORT}", f"SlurmdPort={NODE_PORT}", "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={w / 'munge' / 'munge.sock'},cred_expire={CRED_EXPIRE_S}", "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={w / 'state'}", f"SlurmdSpoolDir={w / 'spool'}/%n",
            f"SlurmctldPidFile={w / 'slurmctld.pid'}", f"SlurmdPidFile={w / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={w / 'slurmctld.log'}", f"SlurmdLogFile={w / 'spool'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "GresTypes=gpu", "ReturnToService=2",
            f"SlurmdTimeout={SLURMD_TIMEOUT_S}", "MpiDefault=none", "MailProg=/bin/true", "MinJobAge=3600",
            "DebugFlags=NO_CONF_HASH", "JobRequeue=1",
        ]
        gres = ["AutoDetect=off"]
        for name, typ, ip, release, gpus, _ in NODES:
            feature = f"{typ},{release}"
            lines.append(f"NodeName={name} NodeAddr={SUBNET}.{ip} CPUs=1 RealMemory=1000 Gres=gpu:{typ}:{gpus} "
                         f"Feature={feature} State=UNKNOWN")
            for g in range(gpus):
                dev = w / "dev" / f"{name}-gpu{g}"
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device standing for a GPU
            gres.append(f"NodeName={name} Name=gpu Type={typ} File={w / 'dev'}/{name}-gpu[0-{gpus - 1}]")
        for part in sorted({p for *_, p in NODES}):
            members = ",".join(n for n, *_, p in NODES if p == part)
            lines.append(f"PartitionName={part} Nodes={members} Default={'YES' if part == 'gpu' else 'NO'} "
                         "MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (etc / "gres.conf").write_text("\n".join(gres) + "\n")

    def up(self) -> None:
        self.write_config()
        if sh("ip", "link", "show", BRIDGE, check=False).returncode == 0:
            raise RuntimeError(f"bridge {BRIDGE} exists already (another cluster-demo running?)")
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        self.bridge = True
        sh("ip", "addr", "add", f"{CTL_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        w = self.work
        self._daemon("munged", ["munged", "-F", f"--socket={w / 'munge' / 'munge.sock'}",
                                f"--key-file={w / 'munge' / 'munge.key'}", f"--pid-file={w / 'munge' / 'munged.pid'}",
                                f"--log-file={w / 'munge' / 'munged.log'}", "--force"])
        self._wait_for(lambda: (w / "munge" / "munge.sock").exists(), "munged")
        self._daemon("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        NODE_ROOT.mkdir(parents=True, exist_ok=True)
        for name, _, ip, release, _, _ in NODES:
            self._node(name, ip, self.roots[release])
        self._wait_for(lambda: self.states() and all(not s.endswith("*") and s not in ("down", "unknown")
                                                     for s in self.states().values()), "every slurmd registered",
                       120)

    def _daemon(self, name: str, argv: list[str], ns: Optional[str] = None, script: Optional[str] = None) -> None:
        logf = open(self.work / f"{name}.out", "w")
        cmd = argv if script is None else ["sh", "-c", script]
        if ns is not None:
            cmd = ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--propagation", "private", *cmd]
        self.procs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                            text=True, start_new_session=True, env={**os.environ, **self.env()})

    def _node(self, name: str, ip: int, tree: Path) -> None:
        ns, outer, inner = f"{self.tag}{name}", f"{self.tag}h{name}", f"{self.tag}c{name}"
        sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        self.links.append(outer)
        sh("ip", "link", "set", outer, "master", BRIDGE)
        sh("ip", "link", "set", outer, "up")
        sh("ip", "link", "set", inner, "netns", ns)
        for argv in (["ip", "addr", "add", f"{SUBNET}.{ip}/24", "dev", inner], ["ip", "link", "set", inner, "up"],
                     ["ip", "link", "set", "lo", "up"]):
            sh("nsenter", f"--net=/run/netns/{ns}", *argv)
        d = self.work / "nodes" / name
        upper, ovwork = d / "upper", d / "ovwork"
        for made in (upper / "etc", ovwork, self.work / "spool" / name):
            made.mkdir(parents=True, exist_ok=True)
        (upper / "etc" / "hostname").write_text(name + "\n")
        r = NODE_ROOT
        # The node's own root at NODE_ROOT (private to its mount namespace), with /proc, /dev and the shared
        # directory (the same path inside as outside) for the jobs that chroot into it.
        script = (f"mount -t overlay overlay -o lowerdir={tree},upperdir={upper},workdir={ovwork} {r} && "
                  f"mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && "
                  f"mkdir -p {r}{self.shared} && mount --bind {self.shared} {r}{self.shared} && "
                  f"exec slurmd -D -f {self.conf} -N {name}")
        self._daemon(f"slurmd-{name}", [], ns=ns, script=script)

    def kill_slurmd(self, name: str) -> None:
        proc = self.procs[f"slurmd-{name}"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        self._wait_for(lambda: self.states().get(name, "").endswith("*"), f"{name} reported not responding",
                       SLURMD_TIMEOUT_S * 12)

    def netns(self, name: str) -> str:
        return f"{self.tag}{name}"

    def in_node(self, pid: int, name: str) -> bool:
        """Does process pid run in node `name`'s network namespace?"""
        try:
            return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{self.netns(name)}").st_ino
        except OSError:
            return False

    def cut(self, name: str, on: bool) -> None:
        """The partition: node `name` and slurmctld no longer hear each other (on=False heals it)."""
        for rule in CUT:
            sh("ip", "netns", "exec", self.netns(name), "iptables", "-A" if on else "-D", *rule, "-j", "DROP",
               check=on)

    def job(self, job: str) -> dict[str, str]:
        """`scontrol show job`'s key=value words (JobState, Reason, Restarts, NodeList, ...)."""
        done = sh("scontrol", "show", "job", job, check=False, env={**os.environ, **self.env()})
        return dict(w.split("=", 1) for w in done.stdout.split() if "=" in w)

    def states(self) -> dict[str, str]:
        done = sh("sinfo", "-h", "-N", "-o", "%N|%T", check=False, env={**os.environ, **self.env()})
        return dict(line.split("|", 1) for line in done.stdout.split() if "|" in line)

    def _wait_for(self, ready: Any, what: str, limit_s: float = 60) -> None:
        end = time.monotonic() + limit_s
        while not ready():
            if time.monotonic() > end:
                raise RuntimeError(f"{what}: not within {limit_s:.0f} s (logs: {self.work})")
            time.sleep(0.5)

    def slurm(self, *argv: str) -> str:
        return sh(*argv, env={**os.environ, **self.env()}).stdout

    def teardown(self) -> None:
        for name in list(self.procs)[::-1]:
            proc = self.procs[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        for ns in self.namespaces:  # what jobs left running in a node goes too
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", ns, check=False)
        for link in self.links:
            sh("ip", "link", "del", link, check=False)
        if self.bridge:
            sh("ip", "link", "del", BRIDGE, check=False)


def cluster_start(args: list[str], env: dict[str, str]) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-m", "tfgpu_install", "cluster", "slurm", *args, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL)


def cluster_end(proc: "subprocess.Popen[str]") -> tuple[int, dict[str, Any]]:
    try:
        out, err = proc.communicate(timeout=STEP_TIMEOUT_S + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        doc = json.loads(out)
    except ValueError as exc:
        raise RuntimeError(f"cluster slurm printed no JSON (exit {proc.returncode}): {err[-2000:]}") from exc
    if "types" not in doc:
        raise RuntimeError(f"cluster slurm failed (exit {proc.returncode}): {json.dumps(doc)}")
    return proc.returncode, doc


def cluster_cmd(args: list[str], env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    return cluster_end(cluster_start(args, env))


def continue_stopped(keep: Optional[int] = None, only: Optional[int] = None) -> None:
    """Continue every tool stopped at the seam (but `keep`; or `only` that one): the jobs the partition is not
    about go on."""
    for pid in stopped_at_seam() if only is None else [only]:
        if pid != keep:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass


def cut_off(c: Cluster, pid: int) -> dict[str, Any]:
    """The partition, around the job whose tool (pid) is stopped on PARTITIONED: cut the node off from
    slurmctld; Slurm marks it down and requeues the job; continue the stopped run, which finishes behind the
    partition (Slurm never hears of it); heal. -> what was seen."""
    environ = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in kv)
    job = environ[b"SLURM_JOB_ID"].decode()
    log(f"{PARTITIONED}'s job {job} runs (its tool stopped at {STOP_AT}): cutting {PARTITIONED} off from slurmctld")
    c.cut(PARTITIONED, True)
    try:
        started = time.monotonic()

        def requeued() -> bool:
            continue_stopped(keep=pid)
            f = c.job(job)
            return f.get("JobState") == "PENDING" and f.get("Restarts", "0") not in ("", "0")

        fd.wait_for(f"Slurm requeueing job {job} once {PARTITIONED} is lost", requeued, SLURMD_TIMEOUT_S * 18)
        during = c.job(job)
        seen: dict[str, Any] = {
            "job": job, "node": PARTITIONED, "type": PARTITIONED_TYPE, "node_state": c.states().get(PARTITIONED),
            "job_state": during.get("JobState"), "restarts": during.get("Restarts"),
            "requeued_after_s": round(time.monotonic() - started, 1)}
        log(f"job {job} requeued (node {seen['node_state']}); its stopped run goes on behind the partition")
        os.kill(pid, signal.SIGCONT)
        pattern = f"results/*/{PARTITIONED_TYPE}/{job}.done"

        def unseen_run_finished() -> bool:
            continue_stopped()
            return any(c.shared.glob(pattern))

        fd.wait_for(f"job {job}'s first run finishing behind the partition", unseen_run_finished, STEP_TIMEOUT_S)
        first = json.loads(next(c.shared.glob(pattern)).read_text())
        seen["first_run"] = {"restarts": first.get("restarts"), "node": first.get("node"),
                             "job_state_then": c.job(job).get("JobState")}
    finally:
        c.cut(PARTITIONED, False)
    log(f"partition healed: Slurm runs job {job} again once {PARTITIONED} is back")
    return seen


def partitioned_run(c: Cluster, args: list[str], env: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """`cluster slurm` with the stop seam armed in its jobs: every stopped job is continued at once, except
    the first on PARTITIONED, around which the partition happens (cut_off). -> (exit code, JSON, what the
    demo saw)."""
    proc = cluster_start(args, env)
    seen: dict[str, Any] = {}
    try:
        while proc.poll() is None:
            for pid in stopped_at_seam():
                if not seen and c.in_node(pid, PARTITIONED):
                    seen = cut_off(c, pid)
                else:
                    continue_stopped(only=pid)
            time.sleep(0.5)
        rc, doc = cluster_end(proc)
    finally:
        continue_stopped()  # never left stopped, whatever failed
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if not seen:
        raise RuntimeError(f"no job on {PARTITIONED} stopped at {STOP_AT}: the partition case did not happen")
    seen["node_state_after"] = c.states().get(PARTITIONED)
    return rc, doc, seen


def by_type(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["type"]: t for t in doc["types"]}


def scenario(work: Path, roots: dict[str, Path], note: str) -> dict[str, Any]:
    from tests.support.fleet_index import build_index, serve
    from tests.support.install_kit import write_knowledge
    from tfgpu_install.cluster import jobs

    pythons = sorted({v for v in (fd.python_of(t) for t in roots.values()) if v})
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    log("building the package index (fake TensorFlow, the tool and its dependencies)")
    index_root = build_index(work, [p for p in pythons if p != here])
    c = Cluster(work, roots)
    server = None
    try:
        log(f"bringing up slurmctld and {len(NODES)} slurmd on {BRIDGE} ({SUBNET}.0/24)")
        c.up()
        server = serve(index_root, CTL_IP)
        index_url = f"http://{CTL_IP}:{server.server_address[1]}/simple"
        knowledge = c.shared / "knowledge"
        write_knowledge(knowledge, fd.DEMO_MATRIX)
        sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(work / "dist"), timeout=600)
        wheel = next((work / "dist").glob("tfgpu_install-*.whl"))
        log(f"killing {KILLED}'s slurmd; holding {BUSY_TYPE}'s GPU with another job")
        c.kill_slurmd(KILLED)
        blocker = c.slurm("sbatch", "--parsable", "-p", "inference", "--gres", f"gpu:{BUSY_TYPE}:1", "-J", "blocker",
                          "-o", "/dev/null", "--wrap", "sleep 3000").strip()
        env = dict(os.environ, SLURM_CONF=str(c.conf), TFGPU_STATE_DIR=str(work / "controller" / "state"),
                   TFGPU_CACHE_DIR=str(work / "controller" / "cache"),
                   TFGPU_DATA_DIR=str(work / "controller" / "data"), PYTHONPATH=str(REPO))
        base = ["--shared", str(c.shared), "--wheel", str(wheel), "--index-url", index_url, "--allow-cpu",
                "--job-prefix", f"chroot {NODE_ROOT}", "--python", "/usr/bin/python3", "--wait", "60",
                "--job-env", f"TFGPU_PROFILES_DIR={knowledge}", "--job-env", "TFGPU_OVERRIDE_DRIVER=550.54.14",
                "--job-env", "PIP_CONFIG_FILE=/dev/null", "--job-env", "UV_NO_CONFIG=1",
                "--job-env", "HOME=/root", "--job-env", "PATH=/usr/local/bin:/usr/bin:/bin"]
        args = [*base, "--modulefiles", str(c.shared / "modules")]
        log("cluster slurm (first run: every type's tool, env and verification)")
        start = time.monotonic()
        first_rc, first = cluster_cmd(args, env)
        first_wall = round(time.monotonic() - start, 1)
        a100_job = by_type(first)["a100"]["job_id"]
        log(f"requeue a100's job {a100_job}: Slurm runs it a second time under the same id")
        c.slurm("scontrol", "requeue", a100_job)
        c.slurm("scontrol", "update", f"JobId={a100_job}", "StartTime=now")
        log("cluster slurm again (nothing may change; the requeued job is waited for, not resubmitted)")
        second_rc, second = cluster_cmd(args, env)
        key = second["key"]
        res = jobs.results_dir(c.shared, key, "a100")
        answered = jobs.jobs_in(res)
        requeued = jobs.read_job(res, a100_job)
        modules = sorted(str(p.relative_to(c.shared / "modules")) for p in (c.shared / "modules").rglob("*")
                         if p.is_file())
        # --same over the gpu partition's types, the stop seam armed in its jobs (a copy of the test suite's
        # fault site on the shared path, which the nodes see) for the partition case, then once more, unarmed.
        site = c.shared / "faultsite"
        shutil.copytree(REPO / "tests" / "support" / "faultsite", site, ignore=shutil.ignore_patterns("__pycache__"))
        same_args = [*base, "--same", "--partition", "gpu"]
        log(f"cluster slurm --same --partition gpu, {PARTITIONED} ({PARTITIONED_TYPE}) partitioned off while its "
            "job runs")
        start = time.monotonic()
        third_rc, third, cut = partitioned_run(c, [*same_args, "--job-env", f"TFGPU_TEST_STOP_AT={STOP_AT}",
                                                   "--job-env", f"PYTHONPATH={site}"], env)
        same_wall = round(time.monotonic() - start, 1)
        log("cluster slurm --same again (nothing may change)")
        fourth_rc, fourth = cluster_cmd(same_args, env)
        cut_res = jobs.results_dir(c.shared, third["key"], PARTITIONED_TYPE)
        cut_row = by_type(third)[PARTITIONED_TYPE]
        cut.update(answer_sets=jobs.jobs_in(cut_res).count(cut["job"]),
                   runs_read=len(jobs.read_runs(cut_res, cut["job"])),
                   row={k: cut_row.get(k) for k in ("state", "job_id", "runs", "jobs_counted", "changed", "reason",
                                                    "job_runs", "job_states", "verified")})
        rows = []
        for name, row in by_type(second).items():
            rows.append({k: row.get(k) for k in ("type", "nodes", "partitions", "features", "gpu", "state", "reason",
                                                  "job_id", "runs", "jobs_counted", "tensorflow", "python",
                                                  "verified", "gpu_verified", "layers_passed", "changed",
                                                  "unusable_nodes", "modulefile")}
                        | {"first_run": by_type(first)[name]["state"],
                           "first_changed": by_type(first)[name]["changed"]})
        return {
            "scheduler": "slurm " + c.slurm("sinfo", "-V").strip().split()[-1],
            "root_filesystems": note, "first_wall_s": first_wall, "exit_codes": [first_rc, second_rc],
            "types": rows,
            "second_run_changed": sum(1 for t in second["types"] if t.get("changed")),
            "second_run_submitted": len(second.get("submitted") or []),
            "requeued": {"job": a100_job, "second_run_job": by_type(second)["a100"]["job_id"],
                         "restarts": requeued.restarts, "answer_sets": answered.count(a100_job)},
            "killed_slurmd": KILLED, "blocker_job": blocker, "modulefiles": modules,
            "same": {"exit_codes": [third_rc, fourth_rc], "wall_s": same_wall, "key": third["key"],
                     "chosen": third.get("same"), "second_chosen": (fourth.get("same") or {}).get("tensorflow"),
                     "types": {name: {k: row.get(k) for k in ("state", "tensorflow", "python", "verified",
                                                              "gpu_verified", "changed", "runs")}
                                      | {"second_run": by_type(fourth)[name]["state"],
                                         "second_changed": by_type(fourth)[name]["changed"]}
                               for name, row in by_type(third).items()},
                     "second_run_changed": sum(1 for t in fourth["types"] if t.get("changed"))},
            "partition": cut,
        }
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        log("tearing down (slurmd, slurmctld, munged, namespaces, bridge)")
        c.teardown()


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="cluster-demo", description=__doc__.split("\n")[0])
    p.add_argument("--slurm", action="store_true", required=True, help="a Slurm cluster in network namespaces")
    p.add_argument("--json", action="store_true", help="print the JSON result on stdout")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) afterwards")
    p.add_argument("--check", action="store_true", help="only say whether this machine can run the demo")
    a = p.parse_args(argv)
    fd.with_sbin_on_path()  # slurmctld, slurmd, munged, iptables, chroot: root's tools in sbin
    reason = why_not()
    if a.check:
        print(reason or "ok")
        return 0 if reason is None else 3
    if reason is not None:
        log(f"cannot run here: {reason}")
        return 3

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    roots: dict[str, Path] = {}
    for release in ("bookworm", "bullseye"):
        tree, note = fd.debootstrapped(release)
        if tree is None:
            log(f"no {release} root filesystem: {note}")
            return 3
        roots[release] = tree
    work = Path(tempfile.mkdtemp(prefix="tfgpu-cluster-demo-", dir="/var/tmp"))
    try:
        result = scenario(work, roots, "debootstrap bookworm (a100, t4), bullseye (v100); one overlay per node")
    except KeyboardInterrupt:
        log("interrupted: torn down")
        return 130
    except Exception as exc:  # noqa: BLE001 (reported, with the kept work dir; teardown already ran)
        log(f"failed: {exc} (logs: {work})")
        a.keep = True
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    if not a.json:
        log(f"done (work dir {'kept: ' + str(work) if a.keep else 'removed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
