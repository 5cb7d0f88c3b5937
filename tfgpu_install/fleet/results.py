"""Per-host results: what the tfgpu modules returned (one JSON file per host, written by the role on
the controller) and the PLAY RECAP (which hosts were unreachable). Pure parsing, no I/O but reads."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, TypedDict

from tfgpu_install.guard.jsondoc import JSONObject

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


class Unreported(TypedDict):
    """Earlier runs whose result never reached the controller: their ids, and what they applied (None: unknown)."""

    runs: list[str]
    applied: Optional[list[str]]


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
    extra: JSONObject = field(default_factory=dict)
    # The run id the node's ledger holds after this run (acknowledged on the controller), and what earlier
    # runs changed whose result never reached the controller (reported now; applied None: unknown).
    ledger_run: Optional[str] = None
    unreported: Optional[Unreported] = None
    # What the verification that ran checked: the GPU (True), the CPU only (False, --allow-cpu), unknown
    # (None: no verification, or a node tool that does not say); and the names of the layers that passed.
    gpu_verified: Optional[bool] = None
    layers_passed: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        d = asdict(self)
        d["gpus"], d["reasons"], d["applied"] = list(self.gpus), list(self.reasons), list(self.applied)
        d["layers_passed"] = list(self.layers_passed)
        return d


# A node's result is another machine's word: each field is taken only with the type we expect, bounded
# (a wrong type is "unknown", never an exception that would lose every row of the table).
_MAX_FIELD = 400
_MAX_ITEMS = 64


def _str(value: Any, limit: int = _MAX_FIELD) -> Optional[str]:
    return value[:limit] if isinstance(value, str) else None


def _bool(value: Any) -> Optional[bool]:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value < 1e9 else None


def _strs(value: Any, limit: int = _MAX_FIELD) -> tuple[str, ...]:
    """A list of strings (other items dropped); anything but a list is none."""
    if not isinstance(value, list):
        return ()
    return tuple(v[:limit] for v in value[:_MAX_ITEMS] if isinstance(v, str))


def _choice(result: Mapping[str, Any]) -> JSONObject:
    tf = result.get("tensorflow")
    if isinstance(tf, dict):
        return tf
    choice = _dict(_dict(result.get("resolution")).get("choice"))
    return choice


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


def _dict(value: Any) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _failure(result: Mapping[str, Any]) -> tuple[bool, bool, Optional[str], Any, Any]:
    """(failed, unreachable, message, error, hint): a host that was reached but could not work there
    (a read-only or full home) is failed, not unreachable; a known cause in the message names the error."""
    failed = result.get("failed") is True
    unreachable = result.get("unreachable") is True
    message = _text(result.get("msg")) if failed or unreachable else None
    error = _str(result.get("error"), 80) if failed else None
    hint = _text(result.get("hint")) if failed else None
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
    """One host's row from its result file: {"host", "mode", "check_mode", "result": module result}.
    Never raises: a field of the wrong type reads as unknown (a hostile or broken node loses only that)."""
    result = _dict(doc.get("result"))
    mode = _str(doc.get("mode")) or "install"
    host = _dict(result.get("host"))
    check_mode = doc.get("check_mode") is True
    failed, unreachable, message, error, hint = _failure(result)
    changed = result.get("changed") is True and not failed
    state = _state(unreachable, result.get("refused") is True, failed, check_mode, changed)
    choice = _choice(result)
    restored: Optional[bool] = None
    if mode == "restore":
        restored = result.get("restored") is True and not failed
    # A plan (check mode) verified nothing.
    verifies = mode in ("install", "status") and not check_mode
    verified = _bool(result.get("verified")) if verifies else None
    gpu_verified = _bool(result.get("gpu_verified")) if verifies and verified else None
    return HostResult(
        name=name,
        state=state,
        ok=not failed and not unreachable,
        changed=changed,
        machine_id=_str(host.get("machine_id"), 64),
        driver=_str(host.get("driver"), 64),
        gpus=_strs(host.get("gpus"), 120),
        tensorflow=_str(choice.get("tensorflow"), 64),
        cuda=_str(choice.get("cuda"), 64),
        cudnn=_str(choice.get("cudnn"), 64),
        python=_str(choice.get("python"), 64),
        verified=verified,
        seconds=_seconds(result.get("seconds")),
        restored=restored,
        error=error,
        message=message,
        hint=hint,
        exit_code=_int(result.get("exit_code")) if failed else None,
        reasons=_strs(result.get("reasons"), 2000),
        applied=_strs(result.get("applied"), 80),
        snapshot=_str(result.get("snapshot")) or _str(result.get("id")),
        ledger_run=_str(result.get("ledger_run"), 64),
        unreported=_unreported(result.get("unreported")),
        gpu_verified=gpu_verified,
        layers_passed=_strs(result.get("layers_passed"), 40) if verified else (),
    )


def bad_result(name: str, why: str) -> HostResult:
    """The row of a host whose result file could not be understood at all (its row is kept, not lost)."""
    return HostResult(name, "unknown", ok=False, changed=False, error="bad-result",
                      message=f"the host's result could not be read: {why}",
                      hint="see the playbook log; re-run the same command")


def _unreported(value: Any) -> Optional[Unreported]:
    """The node's `unreported` ({runs, applied}) as plain strings, or None."""
    if not isinstance(value, dict):
        return None
    applied = value.get("applied")
    return {"runs": list(_strs(value.get("runs"), 64)),
            "applied": list(_strs(applied, 80)) if isinstance(applied, list) else None}


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
        rows.append(safe_result(name, doc) if doc is not None else unreached(name, recap.get(name, {}), stopped))
    return rows


def safe_result(name: str, doc: Mapping[str, Any]) -> HostResult:
    """host_result, and a row saying why where even that fails (no host's row is ever lost)."""
    try:
        return host_result(name, doc)
    except Exception as exc:  # noqa: BLE001 (one node's bad file must not cost the other rows)
        return bad_result(name, type(exc).__name__)


# A result file is a module's JSON: bounded like every input we read.
MAX_RESULT_BYTES = 8 << 20


def read_result(path: Path) -> Optional[JSONObject]:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_RESULT_BYTES + 1)
        if len(raw) > MAX_RESULT_BYTES:
            return None
        doc = json.loads(raw)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
