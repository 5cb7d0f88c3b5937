"""scripts/fleet-demo --hosts N [--json] [--keep] [--bench [--rootfs debootstrap]]: a real fleet on this one machine.

--bench: one clean `fleet install` on N identical hosts (1-20) through the controller's index, reporting
wall_s, upstream_bytes, served_bytes and hosts[].seconds/state; --rootfs debootstrap gives each host its own
Debian root filesystem (debootstrap, cached; an overlay per host, sshd chrooted in it), else the shared root.

Each host is a network namespace on a private bridge (10.254.77.0/24, nothing else) with its own
mount namespace (own /root, /tmp and /etc/machine-id, bind-mounted) running its own sshd (key auth,
a generated key). The controller serves the tests' package index (fake TensorFlow, small wheels,
the tool's dependencies) on the bridge address and runs `tfgpu-install fleet` against the hosts:

  1. install (node3 is killed in the middle of packages.install; `ghost` is an unreachable address)
  2. install again: node3 resumes, the others do nothing
  3. install a third time: nothing changes anywhere (second_run_changed)
  4. install --same --check: the release every host can run (2.98.0), planned on every host
  5. fleet snapshot, then restore node1's snapshot on all from one offline bundle the controller
     builds and ships: node2 (glibc 2.17) is refused (exit 12)

The fleet is mixed: per-host TFGPU_OVERRIDE_* make node2 an old host (driver 535, glibc 2.17), so it
gets TF 2.98.0 where the others get 2.99.0. No GPU here: --allow-cpu (TF verified on the CPU).
Everything is torn down in a finally block, on failure and on Ctrl-C/SIGTERM too.
Needs root, `ip netns`, unshare, openssh-server (installed with apt-get if missing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
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

SUBNET = "10.254.77"
BRIDGE = "tfgpufd0"
BRIDGE_IP = f"{SUBNET}.1"
GHOST_IP = f"{SUBNET}.250"  # on the bridge, nobody there: the unreachable host
SSH_TIMEOUT_S = 5
STEP_TIMEOUT_S = 600  # bound on each fleet command
KILLED_RUN_TIMEOUT_S = 120  # the whole-run bound of the run that is stopped halfway
KILL_HOST, OLD_HOST = "node3", "node2"

DEMO_MATRIX = """\
format: 1
releases:
  - tensorflow: "2.99.0"
    package: tensorflow
    released: "2024-01-15"
    pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]
    cuda: "12.3"
    cudnn: "9.1"
    sass: ["6.0", "7.0", "8.0", "8.6", "8.9"]
    ptx: ["9.0"]
    manylinux: manylinux_2_34_x86_64
    min_glibc: "2.34"
    cuda_from: pip
    extra: and-cuda
    pins:
      nvidia-cublas-cu12: "12.3.4.1"
      nvidia-cuda-runtime-cu12: "12.3.101"
      nvidia-cudnn-cu12: "9.1.0.70"
    pins_kind: exact
    constraints:
      numpy: ">=1.23.5,<2.0"
      protobuf: ">=3.20.3,<5"
    source: "tests/support/fleet_index.py (the demo's fake TensorFlow, manylinux_2_34: a Debian 11 host differs)"
  - tensorflow: "2.98.0"
    package: tensorflow
    released: "2023-11-01"
    pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]
    cuda: "12.3"
    cudnn: "8.9"
    sass: ["6.0", "7.0", "8.0", "8.6", "8.9"]
    ptx: ["9.0"]
    manylinux: manylinux_2_17_x86_64
    min_glibc: "2.17"
    cuda_from: pip
    extra: and-cuda
    pins:
      nvidia-cublas-cu12: "12.3.4.1"
      nvidia-cuda-runtime-cu12: "12.3.101"
      nvidia-cudnn-cu12: "8.9.7.29"
    pins_kind: exact
    constraints:
      numpy: ">=1.23.5,<2.0"
      protobuf: ">=3.20.3,<5"
    source: "tests/support/wheelhouse.py (the fake TensorFlow the tests build)"
"""


# Root's tools (chroot, sshd, iptables, debootstrap) live in the sbin dirs, which a user's plain PATH leaves
# out (`env -i PATH=/usr/bin:/bin scripts/test` ran the demo and its sshd's `exec chroot` was "not found").
# The demo runs as root and looks there too, as sudo's secure_path would.
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def with_sbin_on_path() -> None:
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    os.environ["PATH"] = os.pathsep.join(dirs + [d for d in SBIN_DIRS if d not in dirs])


def log(msg: str) -> None:
    sys.stderr.write(f"[fleet-demo] {msg}\n")
    sys.stderr.flush()


def sh(*argv: str, check: bool = True, timeout: float = 120, **kw: Any) -> "subprocess.CompletedProcess[str]":
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return done


# --- what can run here ----------------------------------------------------------------------


def why_not() -> Optional[str]:
    """None when this machine can bring hosts up; else why not (the test skips with it)."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"tfgpufd-probe-{os.getpid()}"
    done = sh("ip", "netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"cannot create network namespaces: {done.stderr.strip()}"
    sh("ip", "netns", "del", probe, check=False)
    return None


def ensure_sshd() -> str:
    path = "/usr/sbin/sshd"
    if not os.path.exists(path):
        log("openssh-server is missing: apt-get install -y openssh-server")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        sh("apt-get", "install", "-y", "-qq", "openssh-server", timeout=600, env=env)
    return path


# --- the hosts -------------------------------------------------------------------------------


class Fleet:
    """Namespaces, the bridge, sshd processes and mounts; teardown() undoes whatever was made."""

    def __init__(self, work: Path, n: int, rootfs: Optional[Path] = None, old_rootfs: Optional[Path] = None) -> None:
        """rootfs: each host's own root (an overlay of this tree), else this machine's; old_rootfs: OLD_HOST's
        (an older Debian release: its glibc and Python differ for real)."""
        self.work, self.n, self.rootfs, self.old_rootfs = work, n, rootfs, old_rootfs
        self.tag = f"fd{os.getpid() % 100000}"
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.sshd: list[subprocess.Popen[str]] = []
        self.bridge = False
        self.ssh_dir = work / "ssh"

    def name(self, i: int) -> str:
        return f"node{i}"

    def tree(self, i: int) -> Optional[Path]:
        """The root filesystem host i's overlay is made of (None: it shares this machine's)."""
        if self.old_rootfs is not None and self.name(i) == OLD_HOST:
            return self.old_rootfs
        return self.rootfs

    def home(self, i: int) -> Path:
        """Host i's /root as seen from here (its own overlay keeps what it writes in the upper dir)."""
        d = self.work / "hosts" / self.name(i)
        return d / "home" if self.rootfs is None else d / "upper" / "root"

    def ip(self, i: int) -> str:
        return f"{SUBNET}.{10 + i}"

    def up(self, sshd: str) -> None:
        self.ssh_dir.mkdir(mode=0o700)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.ssh_dir / "id_ed25519"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.ssh_dir / "host_ed25519"))
        shutil.copy(self.ssh_dir / "id_ed25519.pub", self.ssh_dir / "authorized_keys")
        host_key = (self.ssh_dir / "host_ed25519.pub").read_text().split()[:2]
        known = "".join(f"{self.ip(i)} {' '.join(host_key)}\n" for i in range(1, self.n + 1))
        (self.ssh_dir / "known_hosts").write_text(known)
        if sh("ip", "link", "show", BRIDGE, check=False).returncode == 0:
            raise RuntimeError(f"bridge {BRIDGE} exists already (another fleet-demo running?)")
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        self.bridge = True
        sh("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for i in range(1, self.n + 1):
            self._host(i, sshd)
        for i in range(1, self.n + 1):
            self._wait_ssh(i)

    def _host(self, i: int, sshd: str) -> None:
        ns, outer, inner = f"{self.tag}n{i}", f"{self.tag}h{i}", f"{self.tag}c{i}"
        sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        self.links.append(outer)
        sh("ip", "link", "set", outer, "master", BRIDGE)
        sh("ip", "link", "set", outer, "up")
        sh("ip", "link", "set", inner, "netns", ns)
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip(i)}/24", "dev", inner)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        d = self.work / "hosts" / self.name(i)
        for sub in ("home", "tmp"):
            (d / sub).mkdir(parents=True)
        (d / "tmp").chmod(0o1777)
        (d / "machine-id").write_text(f"{os.urandom(16).hex()}\n")
        cfg = d / "sshd_config"
        cfg.write_text("\n".join([
            f"ListenAddress {self.ip(i)}:22", f"HostKey {self.ssh_dir / 'host_ed25519'}",
            f"PidFile {d / 'sshd.pid'}", f"AuthorizedKeysFile {self.ssh_dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "PrintMotd no", "LogLevel ERROR",
            "Subsystem sftp /usr/lib/openssh/sftp-server", ""]))
        # Own mount namespace: this host's home, temp dir and machine id; sshd's sessions live in it.
        script = (f"mount --bind {d / 'home'} /root && mount --bind {d / 'tmp'} /tmp && "
                  f"mount --bind {d / 'machine-id'} /etc/machine-id && mkdir -p /run/sshd && "
                  f"exec {sshd} -D -e -f {cfg}")
        tree = self.tree(i)
        if tree is not None:
            # Its own root filesystem: the debootstrapped tree under a per-host overlay (its own /usr, Python,
            # glibc, /root, /etc/machine-id); the demo's work dir (keys, knowledge) is bound in at the same path.
            root, upper = d / "root", d / "upper"
            for made in (root, upper / "etc", upper / "run" / "sshd", d / "ovwork"):
                made.mkdir(parents=True, exist_ok=True)
            shutil.copy(d / "machine-id", upper / "etc" / "machine-id")
            script = (f"mount -t overlay overlay -o lowerdir={tree},upperdir={upper},workdir={d / 'ovwork'} "
                      f"{root} && mount -t proc proc {root}/proc && mount --bind /dev {root}/dev && "
                      f"mkdir -p {root}{self.work} && mount --bind {self.work} {root}{self.work} && "
                      f"exec chroot {root} /usr/sbin/sshd -D -e -f {cfg}")
        proc = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
                                 "sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(d / "sshd.log", "w"), text=True, start_new_session=True)
        self.sshd.append(proc)

    def _wait_ssh(self, i: int) -> None:
        for _ in range(50):
            with socket.socket() as s:
                s.settimeout(1)
                if s.connect_ex((self.ip(i), 22)) == 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"sshd on {self.name(i)} did not come up (see {self.work}/hosts/{self.name(i)}/sshd.log)")

    def _faultsite(self) -> Path:
        """The fault seam, copied under the work dir: every host sees that (a checkout under /tmp is hidden
        behind each host's own /tmp)."""
        site = self.work / "faultsite"
        if not site.exists():
            shutil.copytree(Path(__file__).resolve().parents[1] / "tests" / "support" / "faultsite", site,
                            ignore=shutil.ignore_patterns("__pycache__"))
        return site

    def inventory(self, path: Path, index_url: str, knowledge: Path, kill: bool, ghost: bool = True,
                  slow: Optional[Path] = None, mixed: bool = True, stop: Optional[str] = None) -> Path:
        """INI inventory: the hosts, their per-host environment (the mixed fleet), and `ghost`.
        slow: node1's Python is this wrapper (it sleeps first): a host that never finishes."""
        common_ssh = (f"-o UserKnownHostsFile={self.ssh_dir / 'known_hosts'} -o StrictHostKeyChecking=yes "
                      f"-o ConnectTimeout={SSH_TIMEOUT_S} -o BatchMode=yes -o ServerAliveInterval=5")
        lines, old_group = ["[gpu]"], []
        for i in range(1, self.n + 1):
            # No index URL here: the fleet's own index (--serve-index) gives the nodes a URL with this run's token.
            env: dict[str, str] = {
                "TFGPU_PROFILES_DIR": str(knowledge), "PIP_CONFIG_FILE": "/dev/null", "UV_NO_CONFIG": "1",
                "TFGPU_OVERRIDE_DRIVER": "550.54.14",
            }
            if mixed and self.name(i) == OLD_HOST:
                # An old driver (there is no GPU here: the driver is always given); its glibc is that of its
                # own Debian 11 root when there is one, else given too.
                env.update(TFGPU_OVERRIDE_DRIVER="535.104.05")
                if self.old_rootfs is None:
                    env.update(TFGPU_OVERRIDE_GLIBC="2.17")
            if kill and self.name(i) == KILL_HOST:
                # The test suite's fault seam: its sitecustomize arms the kill (the tool reads no such variable).
                env["TFGPU_TEST_KILL_AT"] = "packages.install:middle"
                env["PYTHONPATH"] = str(self._faultsite())
            if stop is not None and self.name(i) == stop:
                # The same seam: the tool stops itself (SIGSTOP) mid-install until the demo continues it.
                env["TFGPU_TEST_STOP_AT"] = "packages.install:middle"
                env["PYTHONPATH"] = str(self._faultsite())
            line = f"{self.name(i)} ansible_host={self.ip(i)} tfgpu_env_vars='{json.dumps(env)}'"
            if slow is not None and i == 1:
                line += f" ansible_python_interpreter={slow}"
            (old_group if mixed and self.name(i) == OLD_HOST else lines).append(line)
        if ghost:
            lines.append(f"ghost ansible_host={GHOST_IP}")
        # The old host in its own group (fleet install --same-by group plans one release per group).
        lines += ["", "[old]", *old_group, "", "[fleet:children]", "gpu", "old", "", "[fleet:vars]",
                  "ansible_user=root", f"ansible_ssh_private_key_file={self.ssh_dir / 'id_ed25519'}",
                  f"ansible_ssh_common_args='{common_ssh}'",
                  *([] if slow is not None else ["ansible_python_interpreter=/usr/bin/python3"]),
                  "tfgpu_python=" + ("/usr/bin/python3"
                                     if self.rootfs is not None or not sys.executable.startswith("/usr/")
                                     else sys.executable), ""]
        path.write_text("\n".join(lines))
        return path

    def teardown(self) -> None:
        for proc in self.sshd:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.sshd:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # What ssh sessions left running in a namespace (a tool run ansible started) goes too; the
        # mount namespaces die with their last process.
        for ns in self.namespaces:
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


# --- the scenario ------------------------------------------------------------------------------


def fleet(args: list[str], env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "tfgpu_install", "fleet", *args, "--json"], capture_output=True,
                          text=True, env=env, timeout=STEP_TIMEOUT_S + 60, stdin=subprocess.DEVNULL)
    try:
        doc = json.loads(done.stdout)
    except ValueError as exc:
        raise RuntimeError(f"fleet {args[0]} printed no JSON (exit {done.returncode}): "
                           f"{done.stderr.strip()[-1500:]} {done.stdout[-1500:]}") from exc
    if "hosts" not in doc:
        raise RuntimeError(f"fleet {args[0]} failed (exit {done.returncode}): {json.dumps(doc)}")
    return done.returncode, doc


def wait_for(what: str, ready: Any, limit_s: float = 300) -> None:
    end = time.monotonic() + limit_s
    while not ready():
        if time.monotonic() > end:
            raise RuntimeError(f"{what}: not within {limit_s:.0f} s")
        time.sleep(0.5)


PARTITION_HOST, LATE_ENV = "node1", "/root/late-env"


def stopped_tool() -> Optional[int]:
    """The pid of a tool process that stopped itself at the stop seam (state T), if one has."""
    from tests.support.faults import stopped_at_seam

    return next(iter(stopped_at_seam()), None)


def partition(f: "Fleet", stopping_inv: Path, inv: Path, common: list[str], env: dict[str, str]) -> dict[str, Any]:
    """A network partition between the controller and a host in the middle of its install: node1's tool
    stops itself in the middle of packages.install (stopping_inv arms the seam), ssh to node1 is dropped
    (iptables in its namespace; the fleet's index stays reachable), then the tool is continued. The
    controller reads it unreachable; node1 finishes anyway; the next run must still say it changed."""
    if shutil.which("iptables") is None:
        return {"skipped": "no iptables on this machine (apt-get install iptables)"}
    ns = f"{f.tag}n1"
    rules = [["INPUT", "-p", "tcp", "--dport", "22"], ["OUTPUT", "-p", "tcp", "--sport", "22"]]
    home = f.home(1)
    ledger = home / ".local" / "share" / "tfgpu-install" / "tool" / ".tfgpu-fleet-ledger.json"

    def finished_on_node() -> bool:
        try:
            entry = json.loads(ledger.read_text()).get(LATE_ENV) or {}
        except (OSError, ValueError):
            return False
        return entry.get("applied") is not None

    target = ["--limit", PARTITION_HOST, "--env", LATE_ENV, *common]
    proc = subprocess.Popen([sys.executable, "-m", "tfgpu_install", "fleet", "install", "-i", str(stopping_inv),
                             *target, "--json"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    args = ["install", "-i", str(inv), *target]
    stopped: list[int] = []

    def tool_stopped() -> bool:
        found = stopped_tool()
        if found is not None:
            stopped.append(found)
        return found is not None or proc.poll() is not None

    try:
        wait_for("node1's tool stopping mid-install", tool_stopped)
        for rule in rules:
            sh("ip", "netns", "exec", ns, "iptables", "-A", *rule, "-j", "DROP")
        for pid in stopped:  # it finishes behind the partition
            os.kill(pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=STEP_TIMEOUT_S)
        during = by_name(json.loads(out))[PARTITION_HOST]
        wait_for("node1 finishing its install unseen", finished_on_node)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)  # never left stopped, whatever failed
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        for rule in rules:
            sh("ip", "netns", "exec", ns, "iptables", "-D", *rule, "-j", "DROP", check=False)
    _, after = fleet(args, env)
    _, then = fleet(args, env)
    a, t = by_name(after)[PARTITION_HOST], by_name(then)[PARTITION_HOST]
    return {"during": during.get("state"), "after": a.get("state"), "unreported": a.get("unreported"),
            "then": t.get("state")}


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["name"]: h for h in doc["hosts"]}


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def timed_fleet(args: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    start = time.monotonic()
    _, doc = fleet(args, env)
    return round(time.monotonic() - start, 1), doc


def cpu_busy_s() -> Optional[float]:
    """Seconds of CPU this whole machine spent busy so far (/proc/stat: all but idle and iowait): the
    hosts' work runs in namespaces under sshd, not as our children, so only the machine-wide count sees it."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(x) for x in fields]
        return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def children_cpu_s() -> float:
    """CPU seconds of our finished children: the `fleet` command and everything it waited for
    (ansible-playbook, its workers, ssh clients, the index it serves): the controller's part."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cpu_of(before: Optional[float], after: Optional[float], wall: float, controller: float) -> dict[str, Any]:
    """The CPU the run kept busy, the controller's part of it, and the least wall time that much work
    takes on this machine's cores (other load on the machine counts too: run the bench on a quiet one)."""
    cores = os.cpu_count() or 1
    busy = None if before is None or after is None else round(after - before, 1)
    return {"cpu_cores": cores, "cpu_busy_s": busy, "controller_cpu_s": round(controller, 1),
            "cpu_floor_s": None if busy is None else round(busy / cores, 1),
            "cpu_utilisation": None if busy is None or wall <= 0 else round(busy / (cores * wall), 2)}


def host_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": h["name"], "state": h.get("state"), "seconds": h.get("seconds"),
             "tensorflow": h.get("tensorflow"), "gpu_verified": h.get("gpu_verified"), "error": h.get("error"),
             "message": h.get("message")}
            for h in doc["hosts"]]


def bytes_of(doc: dict[str, Any]) -> dict[str, Optional[int]]:
    m = doc.get("mirror") or {}
    return {"upstream_bytes": m.get("upstream_bytes"), "served_bytes": m.get("served_bytes")}


ROOTFS_CACHE = Path("/var/tmp/tfgpu-fleet-demo-rootfs")
ROOTFS_RELEASE = "bookworm"  # Debian 12: glibc 2.36, Python 3.11
OLD_RELEASE = "bullseye"  # Debian 11: glibc 2.31, Python 3.9 (the mixed fleet's old host, for real)


def debootstrapped(release: str = ROOTFS_RELEASE) -> tuple[Optional[Path], str]:
    """A Debian root filesystem of `release` for the hosts (debootstrap from Debian's mirror, kept under
    /var/tmp between runs), or None and why not (the demo then runs with the shared root)."""
    tree = ROOTFS_CACHE / release
    if (tree / "usr" / "sbin" / "sshd").exists() and (tree / "usr" / "bin" / "python3").exists():
        return tree, f"debootstrap {release} (cached), one overlay per host"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if shutil.which("debootstrap") is None:
        done = sh("apt-get", "install", "-y", "-qq", "debootstrap", check=False, timeout=600, env=env)
        if done.returncode != 0:
            return None, f"shared (no debootstrap: {done.stderr.strip()[-200:]})"
    partial = ROOTFS_CACHE / f"{release}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    ROOTFS_CACHE.mkdir(parents=True, exist_ok=True)
    log(f"debootstrap {release} (minbase, python3, python3-venv, openssh-server): a few minutes, once")
    done = sh("debootstrap", "--variant=minbase", "--include=python3,python3-venv,openssh-server",
              release, str(partial), "http://deb.debian.org/debian", check=False, timeout=1800, env=env)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        return None, f"shared (debootstrap {release} failed: {done.stdout.strip()[-200:]})"
    os.replace(partial, tree)
    return tree, f"debootstrap {release}, one overlay per host"


def python_of(tree: Path) -> Optional[str]:
    """The X.Y of a root filesystem's python3 (its /usr/bin/python3 -> python3.X link)."""
    target = os.readlink(tree / "usr" / "bin" / "python3") if (tree / "usr" / "bin" / "python3").is_symlink() else ""
    found = re.fullmatch(r"(?:.*/)?python(3\.\d+)", target)
    return found.group(1) if found else None


def scenario(work: Path, n: int, show: bool, bench: bool = False, rootfs: Optional[Path] = None,
             rootfs_note: str = "shared", old_rootfs: Optional[Path] = None) -> dict[str, Any]:
    from tests.support.fleet_index import build_index, serve

    sshd = ensure_sshd()
    log("building the package index (fake TensorFlow, the tool and its dependencies)")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    others = sorted({v for v in (python_of(t) for t in (rootfs, old_rootfs) if t is not None) if v and v != here})
    index_root = build_index(work, others)
    knowledge = work / "knowledge"
    from tests.support.install_kit import write_knowledge

    write_knowledge(knowledge, DEMO_MATRIX)
    f = Fleet(work, n, rootfs, old_rootfs)
    server = None
    try:
        log(f"bringing up {n} hosts on {BRIDGE} ({SUBNET}.0/24)")
        f.up(sshd)
        # The upstream index listens on the controller's loopback only: the nodes cannot reach it, they get
        # everything through the fleet's own index (--serve-index on the bridge), each file fetched once.
        server = serve(index_root, "127.0.0.1")
        upstream_url = f"http://127.0.0.1:{server.server_address[1]}/simple"
        mirror_port = free_port(BRIDGE_IP)
        index_url = f"http://{BRIDGE_IP}:{mirror_port}/simple/"
        wheel_dir = work / "dist"
        sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w",
           str(wheel_dir), timeout=600)
        wheel = next(wheel_dir.glob("tfgpu_install-*.whl"))
        env = dict(os.environ, TFGPU_STATE_DIR=str(work / "controller" / "state"),
                   TFGPU_CACHE_DIR=str(work / "controller" / "cache"), TFGPU_DATA_DIR=str(work / "controller" / "data"),
                   TFGPU_PROFILES_DIR=str(knowledge), PIP_CONFIG_FILE="/dev/null",
                   PIP_TRUSTED_HOST="127.0.0.1",  # the bundle's pip: the demo's upstream is plain http
                   ANSIBLE_HOME=str(work / "controller" / "ansible"),
                   ANSIBLE_LOCAL_TEMP=str(work / "controller" / "ansible" / "tmp"), PYTHONPATH=str(REPO),
                   PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
        common = ["--wheel", str(wheel), "--index-url", upstream_url, "--serve-index", f"{BRIDGE_IP}:{mirror_port}",
                  "--allow-cpu", "--timeout", str(STEP_TIMEOUT_S)]
        if bench:
            inv = f.inventory(work / "hosts.ini", index_url, knowledge, kill=False, ghost=False, mixed=False)
            log(f"fleet install on {n} host(s), one fresh controller cache")
            busy_before, ours_before = cpu_busy_s(), children_cpu_s()
            wall, doc = timed_fleet(["install", "-i", str(inv), *common], env)
            cpu = cpu_of(busy_before, cpu_busy_s(), wall, children_cpu_s() - ours_before)
            return {"engine": doc["engine"], "mode": "bench", "root_filesystems": rootfs_note, "n": n,
                    "wall_s": wall, **cpu, **bytes_of(doc),
                    "mirror": doc.get("mirror"), "hosts": host_rows(doc)}
        first_inv = f.inventory(work / "hosts-first.ini", index_url, knowledge, kill=True)
        inv = f.inventory(work / "hosts.ini", index_url, knowledge, kill=False)

        log(f"fleet install ({KILL_HOST} killed mid-install, ghost unreachable)")
        first_wall, first = timed_fleet(["install", "-i", str(first_inv), *common], env)
        log("fleet install again (resumes the killed host)")
        _, resume = fleet(["install", "-i", str(inv), *common], env)
        log("fleet install a third time (nothing may change)")
        _, second = fleet(["install", "-i", str(inv), *common], env)
        if show:  # the human form: the live table (stderr), then the final table and summary
            for action in ("install", "status"):
                done = subprocess.run([sys.executable, "-m", "tfgpu_install", "fleet", action, "-i", str(inv),
                                       *common[:6]]
                                      + (["--allow-cpu"] if action == "install" else []), env={**env, "COLUMNS": "120"},
                                      capture_output=True, text=True, timeout=STEP_TIMEOUT_S + 60)
                sys.stderr.write(f"$ tfgpu-install fleet {action} -i hosts.ini\n{done.stderr}{done.stdout}\n")
        log("fleet install --same --check (one release every host can run)")
        _, same = fleet(["install", "-i", str(inv), "--same", "--check", *common], env)
        log("fleet install --same --same-by group --check (one release per inventory group)")
        _, same_group = fleet(["install", "-i", str(inv), "--same", "--same-by", "group", "--check", *common], env)
        log("fleet snapshot, then restore node1's snapshot on every host")
        _, snaps = fleet(["snapshot", "-i", str(inv), "--limit", "node1", *common[:6], "-o", str(work / "snapshots")],
                         env)
        snap_file = snaps["snapshots"]["node1"]
        # Offline: the controller bundles every wheel once (`snapshot bundle`), ships it, nodes use only it.
        _, restored = fleet(["restore", "-i", str(inv), snap_file, "--offline", *common], env)
        # A run stopped halfway keeps every finished host's row: node1's Python sleeps first, the whole
        # run's bound (--timeout) stops ansible-playbook; the other hosts' rows were written as each finished.
        slow = work / "slow-python"
        slow.write_text("#!/bin/sh\nsleep 3600\nexec /usr/bin/python3 \"$@\"\n")
        slow.chmod(0o755)
        slow_inv = f.inventory(work / "hosts-slow.ini", index_url, knowledge, kill=False, ghost=False, slow=slow)
        log(f"fleet status with node1 stuck, stopped by --timeout {KILLED_RUN_TIMEOUT_S}")
        _, killed = fleet(["status", "-i", str(slow_inv), "--wheel", str(wheel), "--index-url", upstream_url,
                           "--serve-index", f"{BRIDGE_IP}:{mirror_port}", "--timeout", str(KILLED_RUN_TIMEOUT_S)], env)
        log(f"fleet install of a new env on {PARTITION_HOST}, its ssh partitioned off mid-run")
        stopping_inv = f.inventory(work / "hosts-stop.ini", index_url, knowledge, kill=False, ghost=False,
                                   stop=PARTITION_HOST)
        partitioned = partition(f, stopping_inv, inv, common, env)
        first_h, resume_h, second_h, restore_h = (by_name(d) for d in (first, resume, second, restored))
        hosts = []
        for name in [f.name(i) for i in range(1, n + 1)] + ["ghost"]:
            h = resume_h.get(name, {})
            hosts.append({
                "name": name, "state": first_h.get(name, {}).get("state"),
                "seconds": first_h.get(name, {}).get("seconds"), "machine_id": h.get("machine_id"),
                "ok": bool(h.get("ok")),
                "changed": bool(first_h.get(name, {}).get("changed") or h.get("changed")),
                "tensorflow": h.get("tensorflow"), "python": h.get("python"),
                # What verification checked: no GPU here, so the CPU only (gpu_verified false), and its layers.
                "verified": h.get("verified"), "gpu_verified": h.get("gpu_verified"),
                "layers_passed": h.get("layers_passed"),
                "restored": bool(restore_h.get(name, {}).get("restored")),
                "first_run": first_h.get(name, {}).get("state"), "resumed": bool(h.get("changed")),
                "second_run": second_h.get(name, {}).get("state"),
                "restore": {k: restore_h.get(name, {}).get(k) for k in ("state", "error", "exit_code", "reasons")},
            })
        return {
            "engine": first["engine"],
            "root_filesystems": rootfs_note,
            "wall_s": first_wall,
            **bytes_of(first),
            "hosts": hosts,
            "killed_run": {h["name"]: h.get("state") for h in killed["hosts"]},
            "killed_run_summary": killed.get("summary"),
            "partition": partitioned,
            "second_run_changed": sum(1 for h in second["hosts"] if h.get("changed")),
            "snapshot": snap_file,
            "offline_bundle": restored.get("offline"),
            "same": {"tensorflow": (same.get("same") or {}).get("tensorflow"),
                     "explain": (same.get("same") or {}).get("explain"),
                     "planned": {h["name"]: h.get("tensorflow") for h in same["hosts"] if h.get("ok")}},
            "same_by_group": {g: (r or {}).get("tensorflow")
                              for g, r in ((same_group.get("same") or {}).get("groups") or {}).items()},
            "same_by_group_planned": {h["name"]: h.get("tensorflow") for h in same_group["hosts"] if h.get("ok")},
        }
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        log("tearing down (sshd, namespaces, veths, bridge)")
        f.teardown()


def roots(kind: str, bench: bool) -> tuple[Optional[Path], Optional[Path], str]:
    """(every host's root, OLD_HOST's root, which ran): with debootstrap, Debian 12 for the hosts and, in
    the full scenario, Debian 11 for the old host (glibc 2.31, Python 3.9); shared when they cannot be made."""
    if kind != "debootstrap":
        return None, None, "shared"
    rootfs, note = debootstrapped()
    if rootfs is None or bench:
        if rootfs is None:
            log(f"no own root filesystems: {note}")
        return rootfs, None, note
    old, old_note = debootstrapped(OLD_RELEASE)
    if old is None:
        log(f"no own root filesystems: {old_note}")
        return None, None, old_note
    return rootfs, old, f"{note}; {OLD_HOST}: {old_note}"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="fleet-demo", description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=3, help="number of hosts (2-20)")
    p.add_argument("--json", action="store_true", help="print the JSON result on stdout")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) afterwards")
    p.add_argument("--check", action="store_true", help="only say whether this machine can run the demo")
    p.add_argument("--rootfs", choices=["shared", "debootstrap"], default="shared",
                   help="the hosts share this machine's root (default), or each has its own Debian root filesystem "
                   "(debootstrap, an overlay per host; the old host of the full scenario gets Debian 11; falls "
                   "back to shared if they cannot be made)")
    p.add_argument("--bench", action="store_true",
                   help="one clean `fleet install` on N identical hosts (1-20): wall_s, upstream_bytes, served_bytes, "
                   "hosts[].seconds (scripts of BENCHMARKS.md's fleet table)")
    a = p.parse_args(argv)
    with_sbin_on_path()
    reason = why_not()
    if a.check:
        print(reason or "ok")
        return 0 if reason is None else 3
    if reason is not None:
        log(f"cannot run here: {reason}")
        return 3
    if not (1 if a.bench else 3) <= a.hosts <= 20:
        log("--hosts must be 3..20 (the scenario needs an old host and a killed host), 1..20 with --bench")
        return 2

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # the finally blocks tear down

    signal.signal(signal.SIGTERM, stop)
    work = Path(tempfile.mkdtemp(prefix="tfgpu-fleet-demo-", dir="/var/tmp"))
    try:
        rootfs, old_rootfs, note = roots(a.rootfs, a.bench)
        result = scenario(work, a.hosts, show=not a.json and not a.bench, bench=a.bench, rootfs=rootfs,
                          rootfs_note=note, old_rootfs=old_rootfs)
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
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(json.dumps(result, indent=2))
        log(f"done (work dir {'kept: ' + str(work) if a.keep else 'removed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
