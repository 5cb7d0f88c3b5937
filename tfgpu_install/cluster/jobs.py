"""The job a node type runs, and what it leaves behind.

The script (pure text, every value quoted for sh) bootstraps the tool into a venv on the shared path (one per
type and wheel: the type's own Python and glibc), installs or restores the env for that type on the shared
path, verifies it, and writes its answers under results/<key>/<type>/<job id>.*: a job Slurm runs twice (a
requeue keeps its id) writes the same files again, so it counts once. `key` names what was asked (the
snapshot, or the profile and its ceiling). A node's files are another machine's word: read bounded and typed.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence
from urllib.parse import urlsplit

_MAX_DOC = 4 << 20
MAX_RUNS = 16  # earlier runs of one job read back (Slurm requeues a job a few times, not thousands)
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class JobSpec:
    mode: str  # install | plan | restore
    shared: Path  # the shared directory every node sees at the same path
    key: str  # what was asked (results/<key>/...)
    type_name: str
    wheel: Path  # under shared/wheels
    wheel_tag: str  # the wheel's sha256 prefix: a new wheel gets a new tool venv
    index_url: Optional[str]
    profile: Optional[str] = None  # install / plan
    snapshot: Optional[Path] = None  # restore (under shared)
    allow_cpu: bool = False
    python: str = "python3"
    env_vars: Mapping[str, str] = field(default_factory=dict)

    @property
    def env(self) -> Path:
        return self.shared / "envs" / self.key / self.type_name

    @property
    def tool(self) -> Path:
        return self.shared / "tool" / f"{self.type_name}-{self.wheel_tag}"

    @property
    def results(self) -> Path:
        return results_dir(self.shared, self.key, self.type_name)


def results_dir(shared: Path, key: str, type_name: str) -> Path:
    return shared / "results" / key / type_name


def _q(value: object) -> str:
    return shlex.quote(str(value))


def env_exports(env_vars: Mapping[str, str]) -> list[str]:
    lines = []
    for k, v in env_vars.items():
        if not _ENV_NAME.match(k) or "\0" in v:
            raise ValueError(f"not an environment variable: {k!r}")
        lines.append(f"export {k}={_q(v)}")
    return lines


def _tool_args(spec: JobSpec) -> list[str]:
    index = ["--index-url", spec.index_url] if spec.index_url else []
    cpu = ["--allow-cpu"] if spec.allow_cpu else []
    if spec.mode == "restore":
        assert spec.snapshot is not None
        return ["snapshot", "restore", str(spec.snapshot), "--env", str(spec.env), "-y", *index, *cpu, "--json"]
    dry = ["--dry-run"] if spec.mode == "plan" else []
    return ["install", "-y", "--env", str(spec.env), "--profile", spec.profile or "stable", *index, *cpu, *dry,
            "--json"]


def script(spec: JobSpec) -> str:
    """The job's shell script: every value from the request is quoted; nothing else is pasted in."""
    tool, res = spec.tool, spec.results
    pip_index = ["--index-url", spec.index_url] if spec.index_url else []
    host = urlsplit(spec.index_url or "").hostname
    if spec.index_url and spec.index_url.startswith("http://") and host:
        pip_index += ["--trusted-host", host]  # the user named this plain-http index: pip refuses it otherwise
    bootstrap = " ".join(_q(w) for w in ["-m", "pip", "install", "-q", "--disable-pip-version-check", *pip_index,
                                         str(spec.wheel)])
    verify = "" if spec.mode == "plan" else (
        f'"$tool/bin/tfgpu-install" verify --env {_q(spec.env)}{" --cpu-ok" if spec.allow_cpu else ""} --json '
        f'> "$res/$id.verify.json" 2> "$res/$id.verify.log"\necho $? > "$res/$id.verify.rc"\n')
    return "\n".join([
        "#!/bin/sh",
        f"# tfgpu-install cluster: {spec.mode} for node type {spec.type_name} ({spec.key})",
        "set -u",
        # sbatch --export=NONE: the login node's environment does not leak into the job; these and --job-env do.
        'export PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"',
        'export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"',
        *env_exports(spec.env_vars),
        f"res={_q(res)}",
        f"tool={_q(tool)}",
        'id="${SLURM_JOB_ID:-nojob}"',
        'run="${SLURM_RESTART_COUNT:-0}"',
        'mkdir -p "$res"',
        # A requeued job runs again under the same id (Slurm runs a batch job at least once). This run writes
        # its answers afresh; what an earlier run left goes to earlier/<id>/<its restart count>/, so what it
        # did (changed the env, on which node, finished or not) stays known.
        'set -- "$res/$id".*',
        'if [ -e "$1" ]; then',
        '  prev="$(head -c 12 "$res/$id.run" 2>/dev/null)"',
        '  case "$prev" in ""|*[!0-9]*) prev=unknown ;; esac',
        '  mkdir -p "$res/earlier/$id" && rm -rf "$res/earlier/$id/$prev" && mkdir "$res/earlier/$id/$prev" \\',
        '    && mv "$@" "$res/earlier/$id/$prev/"',
        'fi',
        'rm -f "$res/$id".*',
        'echo "$run" > "$res/$id.run"',
        # The tool's venv is made in place (a venv cannot move), under a lock, and marked complete last.
        'mkdir -p "$(dirname "$tool")"',
        "(",
        "  flock 9",
        '  if [ ! -f "$tool/.tfgpu-complete" ]; then',
        '    rm -rf "$tool"',
        f'    if {_q(spec.python)} -m venv "$tool" && "$tool/bin/python" {bootstrap} '
        '> "$res/$id.bootstrap.log" 2>&1; then',
        '      touch "$tool/.tfgpu-complete"',
        "    else",
        '      echo 6 > "$res/$id.tool.rc"',
        "    fi",
        "  fi",
        ') 9> "$tool.lock"',
        'if [ -f "$tool/.tfgpu-complete" ]; then',
        "  " + " ".join(['"$tool/bin/tfgpu-install"', *(_q(a) for a in _tool_args(spec))])
        + ' > "$res/$id.install.json" 2> "$res/$id.install.log"',
        '  echo $? > "$res/$id.install.rc"',
        *(("  " + line) for line in verify.splitlines()),
        "fi",
        'printf \'{"host": "%s", "node": "%s", "restarts": "%s"}\\n\' "$(hostname)" "${SLURMD_NODENAME:-}" "$run" '
        '> "$res/$id.done.tmp" && mv "$res/$id.done.tmp" "$res/$id.done"',
        "",
    ])


def wrapper(inner: Path, prefix: Sequence[str]) -> str:
    """The script sbatch runs when the job must enter something first (a container, a chroot): the prefix's
    words, each quoted, then the inner script."""
    return "#!/bin/sh\nexec " + " ".join(_q(w) for w in [*prefix, "/bin/sh", str(inner)]) + "\n"


# --- what a job left behind -----------------------------------------------------------------------


@dataclass(frozen=True)
class JobResult:
    job_id: str
    finished: bool  # the job wrote its .done file
    host: Optional[str] = None
    restarts: Optional[int] = None  # SLURM_RESTART_COUNT of the run that wrote these answers
    node: Optional[str] = None  # the Slurm node it ran on (SLURMD_NODENAME)
    tool_rc: Optional[int] = None
    install_rc: Optional[int] = None
    verify_rc: Optional[int] = None
    install: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> Optional[bool]:
        """What this run's install said: it changed the env (True), found it in place (False), or unknown."""
        said = self.install.get("changed")
        return said if isinstance(said, bool) else None


def _read(path: Path, limit: int = _MAX_DOC) -> Optional[bytes]:
    try:
        with path.open("rb") as f:
            raw = f.read(limit + 1)
    except OSError:
        return None
    return raw if len(raw) <= limit else None


def _rc(path: Path) -> Optional[int]:
    raw = _read(path, 64)
    text = raw.decode("ascii", "replace").strip() if raw else ""
    return int(text) if text.isdigit() else None


def _doc(path: Path) -> dict[str, Any]:
    raw = _read(path)
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _name(value: object) -> Optional[str]:
    return value[:64] if isinstance(value, str) and _NODE_NAME.match(value) else None


def read_job(res: Path, job_id: str) -> JobResult:
    done = _doc(res / f"{job_id}.done")
    restarts = done.get("restarts")
    host = done.get("host")
    return JobResult(
        job_id=job_id, finished=(res / f"{job_id}.done").is_file(),
        host=host[:64] if isinstance(host, str) else None,
        # from the .done file; for a run that did not finish, from the .run file it wrote first
        restarts=(int(restarts) if isinstance(restarts, str) and restarts.isdigit() and len(restarts) <= 9
                  else _rc(res / f"{job_id}.run")),
        node=_name(done.get("node")),
        tool_rc=_rc(res / f"{job_id}.tool.rc"), install_rc=_rc(res / f"{job_id}.install.rc"),
        verify_rc=_rc(res / f"{job_id}.verify.rc"),
        install=_doc(res / f"{job_id}.install.json"), verify=_doc(res / f"{job_id}.verify.json"))


def read_runs(res: Path, job_id: str, limit: int = MAX_RUNS) -> list[JobResult]:
    """Every run of one job whose answers are known, oldest first: the earlier runs the job script kept under
    earlier/<id>/<restart count>/ (a requeue; at most `limit`, the newest), then the latest run's."""
    earlier: list[tuple[int, Path]] = []
    try:
        for d in islice((res / "earlier" / job_id).iterdir(), 4 * limit):  # bounded: a shared path is not ours alone
            if d.name.isdigit() and len(d.name) <= 9:
                earlier.append((int(d.name), d))
            elif d.name == "unknown":  # answers without their run's count: older than any counted run
                earlier.append((-1, d))
    except OSError:
        pass
    runs = [read_job(d, job_id) for _, d in sorted(earlier)[-limit:]]
    return runs + [read_job(res, job_id)]


def jobs_in(res: Path) -> list[str]:
    """The job ids that left answers for this (key, type), each once (a rerun writes the same names)."""
    try:
        names = [p.name for p in res.iterdir()]
    except OSError:
        return []
    return sorted({n.split(".", 1)[0] for n in names if n.split(".", 1)[0].isdigit()}, key=int)


def tail(path: Path, lines: int = 6) -> str:
    raw = _read(path, 1 << 20)
    return "\n".join((raw or b"").decode("utf-8", "replace").splitlines()[-lines:])
