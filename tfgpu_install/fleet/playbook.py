"""ansible-playbook, run through the injected runner: the argv (pure), where the collection is,
and a run that reports each host's result file as the role writes it (the live table)."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import tfgpu_install
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.files import atomic_write
from tfgpu_install.fleet.results import HostResult, read_result, safe_result
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.runner import Completed, Runner

# The exit status a run stopped by Ctrl-C reports (ExitCode.INTERRUPTED).
INTERRUPTED = 130

# How often the live table looks for new per-host result files.
POLL_S = 0.5
# How long an interrupted ansible-playbook gets to stop its workers before SIGKILL.
STOP_GRACE_S = 15.0
COLLECTIONS_ENV = "TFGPU_ANSIBLE_COLLECTIONS"


@dataclass(frozen=True)
class PlaybookRun:
    inventory: Path
    mode: str  # install | status | snapshot | restore
    results_dir: Path
    extra_vars: Mapping[str, Any] = field(default_factory=dict)
    limit: Optional[str] = None
    forks: Optional[int] = None
    serial: Optional[int] = None
    check: bool = False
    timeout_s: float = 3600.0  # the whole run
    max_fail_percentage: Optional[int] = None


def collections_root(environ: Mapping[str, str]) -> Path:
    """The directory holding ansible_collections/tfgpu/install: $TFGPU_ANSIBLE_COLLECTIONS when set,
    else the installed package's copy (the wheel carries it under tfgpu_install/share), else the
    checkout's (an editable install or a run from the source tree)."""
    given = environ.get(COLLECTIONS_ENV)
    package = Path(tfgpu_install.__file__).resolve().parent
    candidates = [Path(given)] if given else [package / "share", package.parent]
    for root in candidates:
        if site_playbook(root).is_file():
            return root
    raise EnvironmentProblem(
        f"the tfgpu.install Ansible collection is not under {candidates[0]}",
        hint=f"reinstall tfgpu-install (its wheel carries the collection), or set {COLLECTIONS_ENV} to the "
        "directory that holds ansible_collections/",
    )


def site_playbook(root: Path) -> Path:
    return root / "ansible_collections" / "tfgpu" / "install" / "playbooks" / "site.yml"


def extra_vars(run: PlaybookRun) -> JSONObject:
    extra = dict(run.extra_vars)
    extra.update(tfgpu_mode=run.mode, tfgpu_results_dir=str(run.results_dir))
    if run.serial:
        extra["tfgpu_serial"] = run.serial
    if run.max_fail_percentage is not None:
        extra["tfgpu_max_fail_percentage"] = run.max_fail_percentage
    return extra


def playbook_argv(tool: str, playbook: Path, run: PlaybookRun, vars_file: Optional[Path] = None) -> list[str]:
    """The command line; with vars_file, the extra vars go as `-e @FILE` (written by the caller): inline,
    the reported-runs map of ~1,900 hosts already hit "Argument list too long"."""
    extra = extra_vars(run)
    given = "@" + str(vars_file) if vars_file is not None else json.dumps(extra, sort_keys=True)
    argv = [tool, "-i", str(run.inventory), str(playbook), "-e", given]
    if run.limit:
        argv += ["--limit", run.limit]
    if run.forks:
        argv += ["--forks", str(run.forks)]
    if run.check:
        argv.append("--check")
    return argv


# Hosts worked on at once when --forks is not given: one per host, up to this (each fork is an ssh
# client waiting on its node; the work runs on the nodes).
MAX_DEFAULT_FORKS = 64
RESULTS_CALLBACK = "tfgpu.install.tfgpu_results"


def default_forks(hosts: int) -> int:
    return max(1, min(hosts, MAX_DEFAULT_FORKS))


def run_timeout(host_timeout_s: float, hosts: int, forks: int, serial: Optional[int] = None) -> float:
    """The whole run's default bound: each wave of hosts may take the per-host bound (plus the ship and
    probe around it), and there are ceil(hosts / min(forks, batch)) waves."""
    at_once = max(1, min(forks, serial or hosts, hosts))
    waves = -(-hosts // at_once)
    return waves * (host_timeout_s + 300.0) + 120.0


def playbook_env(root: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The collection on Ansible's search path; each host's row written as it finishes (the results
    callback, the free strategy); pipelining; bounded ssh waits. The user's own settings win."""
    env = {"ANSIBLE_COLLECTIONS_PATH": str(root), "ANSIBLE_RETRY_FILES_ENABLED": "False",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    env["ANSIBLE_TIMEOUT"] = environ.get("ANSIBLE_TIMEOUT", "20")
    env["ANSIBLE_STRATEGY"] = environ.get("ANSIBLE_STRATEGY", "free")
    env["ANSIBLE_PIPELINING"] = environ.get("ANSIBLE_PIPELINING", "True")
    enabled = [c.strip() for c in environ.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c.strip()]
    env["ANSIBLE_CALLBACKS_ENABLED"] = ",".join(enabled + ([RESULTS_CALLBACK] if RESULTS_CALLBACK not in enabled
                                                           else []))
    return env


_VERSION = re.compile(r"^ansible-playbook \[core ([^\]]+)\]")


def engine_version(runner: Runner, tool: str) -> str:
    done = runner.run([tool, "--version"], desc="ansible-playbook --version", timeout=60)
    m = _VERSION.match(done.stdout.strip()) if done.ok else None
    return f"ansible-playbook {m.group(1)}" if m else "ansible-playbook (unknown version)"


def stop_playbook(pidfile: Path, worker: threading.Thread, grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT to ansible-playbook's process group (it stops its workers), SIGKILL if it lingers."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        worker.join(grace_s)
        if not worker.is_alive():
            return


def write_vars(run: PlaybookRun) -> Path:
    """The run's extra vars as a JSON file only this user can read (it may carry the index's token)."""
    path = run.results_dir.with_suffix(".vars.json")
    atomic_write(path, json.dumps(extra_vars(run), sort_keys=True), mode=0o600)
    return path


def run_playbook(
    runner: Runner, tool: str, playbook: Path, run: PlaybookRun, env: Mapping[str, str],
    hosts: Sequence[str], on_result: Callable[[HostResult], None],
) -> Completed:
    """ansible-playbook in a worker thread; this thread reports each host's result file once it appears."""
    run.results_dir.mkdir(parents=True, exist_ok=True)
    for stale in run.results_dir.glob("*.json"):
        stale.unlink()
    # The runner starts programs in their own session (a terminal's Ctrl-C does not reach them):
    # the shell records ansible-playbook's pid, so an interrupt here can stop it and its ssh workers.
    pidfile = run.results_dir.with_suffix(".pid")
    vars_file = write_vars(run)
    argv = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(pidfile), *playbook_argv(tool, playbook, run, vars_file)]
    box = _Outcome()

    def work() -> None:
        try:
            box.done = runner.run(argv, desc=f"ansible-playbook ({run.mode})", env=env, timeout=run.timeout_s,
                                  mutating=not run.check)
        except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread)
            box.error = exc

    worker = threading.Thread(target=work, name="ansible-playbook", daemon=True)
    worker.start()
    reported: set[str] = set()

    def report_new() -> None:
        for name in hosts:
            if name in reported:
                continue
            doc = read_result(run.results_dir / f"{name}.json")
            if doc is not None:
                reported.add(name)
                on_result(safe_result(name, doc))

    try:
        while worker.is_alive():
            worker.join(POLL_S)
            report_new()
    except KeyboardInterrupt:
        # Ctrl-C: stop ansible-playbook and its workers; the rows already written stay (the caller
        # reads them, and the hosts without one are "not finished").
        stop_playbook(pidfile, worker)
        got = box.done
        return Completed(tuple(argv), INTERRUPTED, got.stdout if got else "", "interrupted (Ctrl-C)")
    report_new()
    if box.error is not None:
        raise box.error
    assert box.done is not None  # the worker ended without an error: it has the result
    return box.done


@dataclass
class _Outcome:
    """What the worker thread's ansible-playbook ended with."""

    done: Optional[Completed] = None
    error: Optional[BaseException] = None
