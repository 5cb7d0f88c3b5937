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
SQUEUE_FORMAT = "%i|%T|%r"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_GRES_GPU = re.compile(r"^gpu(?::(?P<type>[A-Za-z0-9._-]+))?:(?P<count>\d+)(?:\(.*\))?$")
_JOB_ID = re.compile(r"^(\d{1,12})(?:;[A-Za-z0-9._-]+)?$")
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


def parse_squeue(text: str) -> dict[str, JobState]:
    """`squeue -h -o '%i|%T|%r'` -> job id -> state and the scheduler's reason (None for 'None')."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            out[cells[0]] = JobState(cells[1][:40], None if cells[2] in ("", "None") else cells[2][:300])
    return out


def parse_scontrol_job(text: str) -> Optional[JobState]:
    """`scontrol show job ID` (one record, key=value words): its JobState and Reason."""
    fields = dict(w.split("=", 1) for w in text.split() if "=" in w)
    state = fields.get("JobState")
    if not state:
        return None
    reason = fields.get("Reason")
    return JobState(state[:40], None if reason in (None, "", "None") else reason[:300])
