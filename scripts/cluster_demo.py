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
the requeued job is waited for and counted once. Prints one JSON document. Torn down in a finally block.
Needs root, ip, unshare, nsenter, slurm-wlm, munge, debootstrap (apt-get where missing)."""

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

SUBNET = "10.254.78"
BRIDGE = "tfgpucd0"
CTL_IP = f"{SUBNET}.1"
NODE_ROOT = Path("/var/tmp/tfgpu-cluster-node-root")  # the same path in every node's mount namespace
CTL_PORT, NODE_PORT = 6917, 6918
SLURMD_TIMEOUT_S = 10
# name, type, ip suffix, rootfs release, gpus, partition
NODES = (("a1", "a100", 11, "bookworm", 2, "gpu"), ("a2", "a100", 12, "bookworm", 2, "gpu"),
         ("t1", "t4", 13, "bookworm", 1, "inference"), ("o1", "v100", 14, "bullseye", 1, "gpu"))
KILLED, BUSY_TYPE = "a2", "t4"
STEP_TIMEOUT_S = 1800
sh = fd.sh


def log(msg: str) -> None:
    sys.stderr.write(f"[cluster-demo] {msg}\n")
    sys.stderr.flush()


def why_not() -> Optional[str]:
    reason = fd.why_not()
    if reason:
        return reason
    for tool in ("nsenter", "slurmctld", "slurmd", "munged", "sbatch"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install slurm-wlm munge)"
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
            f"AuthInfo=socket={w / 'munge' / 'munge.sock'}", "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={w / 'state'}", f"SlurmdSpoolDir={w / 'spool'}/%n",
            f"SlurmctldPidFile={w / 'slurmctld.pid'}", f"SlurmdPidFile={w / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={w / 'slurmctld.log'}", f"SlurmdLogFile={w / 'spool'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "GresTypes=gpu", "ReturnToService=2",
            f"SlurmdTimeout={SLURMD_TIMEOUT_S}", "MpiDefault=none", "MailProg=/bin/true", "MinJobAge=3600",
            "DebugFlags=NO_CONF_HASH",
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


def cluster_cmd(args: list[str], env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "tfgpu_install", "cluster", "slurm", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=STEP_TIMEOUT_S + 120,
                          stdin=subprocess.DEVNULL)
    try:
        doc = json.loads(done.stdout)
    except ValueError as exc:
        raise RuntimeError(f"cluster slurm printed no JSON (exit {done.returncode}): {done.stderr[-2000:]}") from exc
    if "types" not in doc:
        raise RuntimeError(f"cluster slurm failed (exit {done.returncode}): {json.dumps(doc)}")
    return done.returncode, doc


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
        args = ["--shared", str(c.shared), "--wheel", str(wheel), "--index-url", index_url, "--allow-cpu",
                "--job-prefix", f"chroot {NODE_ROOT}", "--python", "/usr/bin/python3", "--wait", "60",
                "--modulefiles", str(c.shared / "modules"),
                "--job-env", f"TFGPU_PROFILES_DIR={knowledge}", "--job-env", "TFGPU_OVERRIDE_DRIVER=550.54.14",
                "--job-env", "PIP_CONFIG_FILE=/dev/null", "--job-env", "UV_NO_CONFIG=1",
                "--job-env", "HOME=/root", "--job-env", "PATH=/usr/local/bin:/usr/bin:/bin"]
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
