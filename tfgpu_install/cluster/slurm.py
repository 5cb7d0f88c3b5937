"""Slurm, read and asked through its own commands (the runner runs them): pure parsers of `sinfo`, `sbatch
--parsable`, `squeue` and `scontrol show job` output, the node types a cluster has, and the sbatch argv that
places one job on one type. The unit is the node type: nodes with the same features and GPU GRES type
(a partition's nodes of one type are interchangeable for the question "does this env work there?")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

# What the tool asks sinfo for: one line per node and partition, fields split by '|'.
SINFO_FORMAT = "%N|%P|%f|%G|%T|%E"
SINFO_ARGV = ("sinfo", "-h", "-N", "-o", SINFO_FORMAT)
# id, state, nodes (where it runs now), the scheduler's reason last (it is free text)
SQUEUE_FORMAT = "%i|%T|%N|%r"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_GRES_GPU = re.compile(r"^gpu(?::(?P<type>[A-Za-z0-9._-]+))?:(?P<count>\d+)(?:\(.*\))?$")
_JOB_ID = re.compile(r"^(\d{1,12})(?:;[A-Za-z0-9._-]+)?$")
_NODES = re.compile(r"^[A-Za-z0-9._,\[\]-]+$")  # a hostlist: o1, a[1-2]
# Node states in which a job placed there runs soon; any other (down, drained, not responding) is not usable.
_USABLE = ("idle", "mixed", "allocated", "completing", "planned", "reserved")


@dataclass(frozen=True)
class Node:
    name: str
    partition: str  # without sinfo's '*' for the default partition
    features: tuple[str, ...]
    gpu_type: Optional[str]  # the GRES gpu type (gpu:a100:2 -> a100); None: untyped or no GPU GRES
    gpus: int
    state: str  # sinfo's, lower case, flags kept (idle, down*, drained, mixed, ...)
    reason: Optional[str]

    @property
    def usable(self) -> bool:
        return self.state.rstrip("*~#!%$@^-") in _USABLE and not self.state.endswith("*")


@dataclass(frozen=True)
class NodeType:
    """Nodes that share features and GPU type: one plan, one env, one verification job."""

    name: str  # the GPU type, else the first feature, else "cpu"
    gpu_type: Optional[str]
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    nodes: tuple[str, ...]
    gpus_per_node: int
    usable: tuple[str, ...] = ()  # the nodes whose state lets a job run there now
    down: dict[str, str] = field(default_factory=dict)  # node -> state and reason, for the rest

    @property
    def constraint(self) -> str:
        """--constraint: every feature of the type (AND), so the job lands on a node of this type."""
        return "&".join(self.features)


def _clean(word: str) -> str:
    return word.strip()


def parse_sinfo(text: str) -> list[Node]:
    """`sinfo -h -N -o '%N|%P|%f|%G|%T|%E'`; lines that do not parse (another format, a hostile tool on PATH)
    are left out, never guessed."""
    out: list[Node] = []
    for line in text.splitlines():
        cells = [_clean(c) for c in line.split("|")]
        if len(cells) < 5 or not _NAME.match(cells[0]):
            continue
        partition = cells[1].rstrip("*")
        if not _NAME.match(partition):
            continue
        features = tuple(f for f in cells[2].split(",") if f and f != "(null)" and _NAME.match(f))
        gpu_type, gpus = None, 0
        for gres in cells[3].split(","):
            m = _GRES_GPU.match(gres.strip())
            if m:
                gpu_type, gpus = m.group("type"), int(m.group("count"))
                break
        reason = cells[5] if len(cells) > 5 and cells[5] not in ("", "none") else None
        out.append(Node(cells[0], partition, features, gpu_type, gpus, cells[4].lower()[:40], reason))
    return out


def node_types(nodes: Sequence[Node], partition: Optional[str] = None) -> list[NodeType]:
    """Group nodes by (features, GPU type), in the order sinfo listed them; `partition` keeps only its nodes."""
    groups: dict[tuple[tuple[str, ...], Optional[str]], list[Node]] = {}
    for n in nodes:
        if partition is None or n.partition == partition:
            groups.setdefault((tuple(sorted(n.features)), n.gpu_type), []).append(n)
    types: list[NodeType] = []
    taken: set[str] = set()
    for (features, gpu_type), members in groups.items():
        base = gpu_type or (features[0] if features else "cpu")
        name, i = base, 2
        while name in taken:
            name, i = f"{base}-{i}", i + 1
        taken.add(name)
        names = tuple(dict.fromkeys(m.name for m in members))
        usable = tuple(dict.fromkeys(m.name for m in members if m.usable))
        down = {m.name: m.state + (f" ({m.reason})" if m.reason else "") for m in members
                if m.name not in usable}
        types.append(NodeType(name, gpu_type, features, tuple(dict.fromkeys(m.partition for m in members)), names,
                              max(m.gpus for m in members), usable, down))
    return types


def sbatch_argv(t: NodeType, script: str, job_name: str, output: str, gpus: int = 1,
                partition: Optional[str] = None, time_limit: Optional[str] = None) -> list[str]:
    """One job on one node of type t: its features (--constraint), one GPU of its type (--gres), the type's
    partition; the script file runs as the job. --parsable: the job id is the whole answer."""
    argv = ["sbatch", "--parsable", "--job-name", job_name, "--nodes", "1", "--ntasks", "1", "--output", output,
            "--partition", partition or t.partitions[0], "--requeue", "--export", "NONE"]
    if t.features:
        argv += ["--constraint", t.constraint]
    if t.gpu_type and gpus:
        argv += ["--gres", f"gpu:{t.gpu_type}:{gpus}"]
    elif t.gpus_per_node and gpus:
        argv += ["--gpus", str(gpus)]
    if time_limit:
        argv += ["--time", time_limit]
    return argv + [script]


def parse_job_id(text: str) -> Optional[str]:
    """`sbatch --parsable`: 'ID' or 'ID;cluster'."""
    m = _JOB_ID.match(text.strip())
    return m.group(1) if m else None


@dataclass(frozen=True)
class JobState:
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, ... (Slurm's words)
    reason: Optional[str]
    nodes: Optional[str] = None  # where it runs now (squeue's %N; none while pending)
    restarts: Optional[int] = None  # how often Slurm requeued it (scontrol's Restarts; squeue does not say)

    def describe(self) -> str:
        """'RUNNING on o1', 'PENDING (BeginTime)': one entry of what was seen of a job."""
        return self.state + (f" on {self.nodes}" if self.nodes else "") + (f" ({self.reason})" if self.reason else "")


def parse_squeue(text: str) -> dict[str, JobState]:
    """`squeue -h -o '%i|%T|%N|%r'` (or the older '%i|%T|%r') -> job id -> state, the nodes it runs on and the
    scheduler's reason (None for 'None')."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|", 3)]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        nodes, reason = (cells[2], cells[3]) if len(cells) == 4 else (None, cells[2])
        out[cells[0]] = JobState(cells[1][:40], None if reason in ("", "None") else reason[:300],
                                 nodes[:200] if nodes and _NODES.match(nodes) else None)
    return out


def parse_scontrol_job(text: str) -> Optional[JobState]:
    """`scontrol show job ID` (one record, key=value words): its JobState, Reason and Restarts."""
    fields = dict(w.split("=", 1) for w in text.split() if "=" in w)
    state = fields.get("JobState")
    if not state:
        return None
    reason = fields.get("Reason")
    restarts = fields.get("Restarts", "")
    return JobState(state[:40], None if reason in (None, "", "None") else reason[:300],
                    restarts=int(restarts) if restarts.isdigit() and len(restarts) <= 9 else None)
