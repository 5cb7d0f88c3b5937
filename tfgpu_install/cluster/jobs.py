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
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence
from urllib.parse import urlsplit

_MAX_DOC = 4 << 20
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
        'mkdir -p "$res"',
        'rm -f "$res/$id".*',  # a requeued run writes its answers again, from scratch
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
        'printf \'{"host": "%s", "restarts": "%s"}\\n\' "$(hostname)" "${SLURM_RESTART_COUNT:-0}" '
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
    restarts: Optional[int] = None
    tool_rc: Optional[int] = None
    install_rc: Optional[int] = None
    verify_rc: Optional[int] = None
    install: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)


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


def read_job(res: Path, job_id: str) -> JobResult:
    done = _doc(res / f"{job_id}.done")
    restarts = done.get("restarts")
    host = done.get("host")
    return JobResult(
        job_id=job_id, finished=(res / f"{job_id}.done").is_file(),
        host=host[:64] if isinstance(host, str) else None,
        restarts=int(restarts) if isinstance(restarts, str) and restarts.isdigit() else None,
        tool_rc=_rc(res / f"{job_id}.tool.rc"), install_rc=_rc(res / f"{job_id}.install.rc"),
        verify_rc=_rc(res / f"{job_id}.verify.rc"),
        install=_doc(res / f"{job_id}.install.json"), verify=_doc(res / f"{job_id}.verify.json"))


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
