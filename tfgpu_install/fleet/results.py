"""Per-host results: what the tfgpu modules returned (one JSON file per host, written by the role on
the controller) and the PLAY RECAP (which hosts were unreachable). Pure parsing, no I/O but reads."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

# "node1   : ok=5    changed=1    unreachable=0    failed=0    skipped=1    rescued=0    ignored=1"
_RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")


def parse_recap(stdout: str) -> dict[str, dict[str, int]]:
    """ansible-playbook's PLAY RECAP: host -> {ok, changed, unreachable, failed, ...}."""
    out: dict[str, dict[str, int]] = {}
    seen_recap = False
    for raw in stdout.splitlines():
        line = raw.strip()
        if line.startswith("PLAY RECAP"):
            seen_recap = True
            continue
        m = _RECAP.match(line) if seen_recap else None
        if m:
            counts = dict(kv.split("=", 1) for kv in m.group("counts").split())
            out[m.group("host")] = {k: int(v) for k, v in counts.items()}
    return out


@dataclass(frozen=True)
class HostResult:
    name: str
    # ok | changed | would change (check mode) | failed | refused | unreachable | not finished | unknown
    state: str
    ok: bool
    changed: bool
    machine_id: Optional[str] = None
    driver: Optional[str] = None
    gpus: tuple[str, ...] = ()
    tensorflow: Optional[str] = None
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    python: Optional[str] = None
    verified: Optional[bool] = None
    seconds: Optional[float] = None
    restored: Optional[bool] = None
    error: Optional[str] = None
    message: Optional[str] = None
    hint: Optional[str] = None
    exit_code: Optional[int] = None
    reasons: tuple[str, ...] = ()
    applied: tuple[str, ...] = ()
    snapshot: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The run id the node's ledger holds after this run (acknowledged on the controller), and what earlier
    # runs changed whose result never reached the controller (reported now; applied None: unknown).
    ledger_run: Optional[str] = None
    unreported: Optional[dict[str, Any]] = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpus"], d["reasons"], d["applied"] = list(self.gpus), list(self.reasons), list(self.applied)
        return d


def _choice(result: Mapping[str, Any]) -> dict[str, Any]:
    tf = result.get("tensorflow")
    if isinstance(tf, dict):
        return tf
    choice = (result.get("resolution") or {}).get("choice") or {}
    return choice if isinstance(choice, dict) else {}


# Ansible's own words for a failure that is not the network, and what they mean (checked in order).
_CAUSES = (
    ("Read-only file system", "read-only-fs",
     "a filesystem the node writes to is read-only (Ansible's remote_tmp under the home, the tool venv or the env): "
     "remount it read-write, or point ansible_remote_tmp / tfgpu_tool_venv / --env at a writable directory"),
    ("No space left on device", "disk-full",
     "free space on the node, or point ansible_remote_tmp / tfgpu_tool_venv / --env at a larger filesystem"),
    ("Disk quota exceeded", "disk-full", "the ssh user's disk quota on the node is full"),
    ("Failed to create temporary directory", "remote-tmp",
     "Ansible could log in but not create its temp dir: set ansible_remote_tmp to a directory the ssh user can "
     "write (e.g. /tmp/.ansible-USER)"),
)


def cause(message: str) -> Optional[tuple[str, str]]:
    """(error reference, hint) when Ansible's message names a cause on the node, not the network."""
    for words, error, hint in _CAUSES:
        if words in message:
            return error, hint
    return None


def _text(value: Any, limit: int = 2000) -> Optional[str]:
    """A message for the table: strings only, the tail kept (Ansible puts the cause last)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else "..." + text[-limit:]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _failure(result: Mapping[str, Any]) -> tuple[bool, bool, Optional[str], Any, Any]:
    """(failed, unreachable, message, error, hint): a host that was reached but could not work there
    (a read-only or full home) is failed, not unreachable; a known cause in the message names the error."""
    failed = bool(result.get("failed"))
    unreachable = bool(result.get("unreachable"))
    message = _text(result.get("msg")) if failed or unreachable else None
    error = result.get("error") if failed else None
    hint = result.get("hint") if failed else None
    found = cause(message or "") if (unreachable or error in (None, "ansible-task", "tool-failed")) else None
    if unreachable and found:
        # Logged in, but could not work there (a read-only or full home): not the network.
        unreachable, failed = False, True
    if found:
        error, hint = found
    elif unreachable:
        error = "unreachable"
        hint = "check that the host is up and `ssh` to it works with the inventory's settings"
    return failed, unreachable, message, error, hint


def _state(unreachable: bool, refused: bool, failed: bool, check_mode: bool, changed: bool) -> str:
    """The table's one word for the host."""
    if unreachable:
        return "unreachable"
    if refused:
        return "refused"
    if failed:
        return "failed"
    if check_mode:
        return "would change" if changed else "ok"
    return "changed" if changed else "ok"


def host_result(name: str, doc: Mapping[str, Any]) -> HostResult:
    """One host's row from its result file: {"host", "mode", "check_mode", "result": module result}."""
    result = _dict(doc.get("result") or {})
    mode = str(doc.get("mode") or "install")
    host = _dict(result.get("host") or {})
    failed, unreachable, message, error, hint = _failure(result)
    changed = bool(result.get("changed")) and not failed
    state = _state(unreachable, bool(result.get("refused")), failed, bool(doc.get("check_mode")), changed)
    choice = _choice(result)
    restored: Optional[bool] = None
    if mode == "restore":
        restored = bool(result.get("restored")) and not failed
    # A plan (check mode) verified nothing.
    verifies = mode in ("install", "status") and not doc.get("check_mode")
    return HostResult(
        name=name,
        state=state,
        ok=not failed and not unreachable,
        changed=changed,
        machine_id=host.get("machine_id"),
        driver=host.get("driver"),
        gpus=tuple(str(g) for g in host.get("gpus") or ()),
        tensorflow=choice.get("tensorflow"),
        cuda=choice.get("cuda"),
        cudnn=choice.get("cudnn"),
        python=choice.get("python"),
        verified=result.get("verified") if verifies else None,
        seconds=result.get("seconds"),
        restored=restored,
        error=error,
        message=message,
        hint=hint,
        exit_code=result.get("exit_code") if failed else None,
        reasons=tuple(str(r) for r in result.get("reasons") or ()),
        applied=tuple(str(a) for a in result.get("applied") or ()),
        snapshot=result.get("snapshot") or result.get("id"),
        ledger_run=result.get("ledger_run") if isinstance(result.get("ledger_run"), str) else None,
        unreported=_unreported(result.get("unreported")),
    )


def _unreported(value: Any) -> Optional[dict[str, Any]]:
    """The node's `unreported` ({runs, applied}) as plain strings, or None."""
    if not isinstance(value, dict):
        return None
    applied = value.get("applied")
    return {"runs": [str(r) for r in value.get("runs") or [] if isinstance(r, str)],
            "applied": [str(a) for a in applied] if isinstance(applied, list) else None}


def unreached(name: str, recap: Mapping[str, int], stopped: Optional[str] = None) -> HostResult:
    """A host with no result file: unreachable (the recap says so), never finished (the run was stopped,
    or Ansible never started it: a --serial batch that failed whole ends the play), or unknown."""
    if recap.get("unreachable"):
        return HostResult(name, "unreachable", ok=False, changed=False, error="unreachable",
                          message="ansible could not reach this host over ssh",
                          hint="check that the host is up and `ssh` to it works with the inventory's settings")
    if stopped is not None or not recap:
        why = stopped or "the play ended before this host's turn (a --serial batch failed, or max_fail_percentage)"
        return HostResult(name, "not finished", ok=False, changed=False, error="not-finished",
                          message=f"no result: {why}",
                          hint="re-run the same command: finished hosts report unchanged, this one resumes")
    return HostResult(name, "unknown", ok=False, changed=False, error="no-result",
                      message="the play stopped on this host before tfgpu-install reported",
                      hint="see the playbook log for the task that failed")


def collect(results_dir: Path, hosts: Sequence[str], recap: Mapping[str, Mapping[str, int]],
            stopped: Optional[str] = None) -> list[HostResult]:
    """One row per inventory host, in inventory order. `stopped`: why the run ended early (killed, timed
    out), if it did: hosts without a row then read "not finished"."""
    rows = []
    for name in hosts:
        path = results_dir / f"{name}.json"
        doc = read_result(path)
        rows.append(host_result(name, doc) if doc is not None else unreached(name, recap.get(name, {}), stopped))
    return rows


# A result file is a module's JSON: bounded like every input we read.
MAX_RESULT_BYTES = 8 << 20


def read_result(path: Path) -> Optional[dict[str, Any]]:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_RESULT_BYTES + 1)
        if len(raw) > MAX_RESULT_BYTES:
            return None
        doc = json.loads(raw)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
