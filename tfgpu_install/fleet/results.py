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
    state: str  # ok | changed | would change (check mode) | failed | refused | unreachable | unknown
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


def host_result(name: str, doc: Mapping[str, Any]) -> HostResult:
    """One host's row from the file the role wrote: {"host", "mode", "check_mode", "result": module result}."""
    result = doc.get("result") or {}
    mode = str(doc.get("mode") or "install")
    host = result.get("host") or {}
    failed = bool(result.get("failed"))
    unreachable = bool(result.get("unreachable"))
    changed = bool(result.get("changed")) and not failed
    refused = bool(result.get("refused"))
    if unreachable:
        state = "unreachable"
    elif refused:
        state = "refused"
    elif failed:
        state = "failed"
    elif doc.get("check_mode"):
        state = "would change" if changed else "ok"
    else:
        state = "changed" if changed else "ok"
    choice = _choice(result)
    restored: Optional[bool] = None
    if mode == "restore":
        restored = bool(result.get("restored")) and not failed
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
        # A plan (check mode) verified nothing.
        verified=result.get("verified") if mode in ("install", "status") and not doc.get("check_mode") else None,
        seconds=result.get("seconds"),
        restored=restored,
        error=result.get("error") if failed else None,
        message=result.get("msg") if failed else None,
        hint=result.get("hint") if failed else None,
        exit_code=result.get("exit_code") if failed else None,
        reasons=tuple(str(r) for r in result.get("reasons") or ()),
        applied=tuple(str(a) for a in result.get("applied") or ()),
        snapshot=result.get("snapshot") or result.get("id"),
    )


def unreached(name: str, recap: Mapping[str, int]) -> HostResult:
    """A host with no result file: unreachable (the recap says so) or stopped before our module ran."""
    if recap.get("unreachable"):
        return HostResult(name, "unreachable", ok=False, changed=False, error="unreachable",
                          message="ansible could not reach this host over ssh",
                          hint="check that the host is up and `ssh` to it works with the inventory's settings")
    return HostResult(name, "unknown", ok=False, changed=False, error="no-result",
                      message="the play stopped on this host before tfgpu-install reported",
                      hint="see the playbook log for the task that failed")


def collect(results_dir: Path, hosts: Sequence[str], recap: Mapping[str, Mapping[str, int]]) -> list[HostResult]:
    """One row per inventory host, in inventory order."""
    rows = []
    for name in hosts:
        path = results_dir / f"{name}.json"
        doc = read_result(path)
        rows.append(host_result(name, doc) if doc is not None else unreached(name, recap.get(name, {})))
    return rows


def read_result(path: Path) -> Optional[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
