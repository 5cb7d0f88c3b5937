"""`status`: the env's steps (done, pending, interrupted) and its last verification.
Read-only: it runs each step's check(), never apply()."""

from __future__ import annotations

from typing import Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.verification import BadRecord, read_record
from tfgpu_install.errors import ExitCode, TfgpuError
from tfgpu_install.report import Block, Result, Text, table


def _verification(ctx: Context, env: Any) -> dict[str, Any] | None:
    try:
        doc = read_record(ctx, env)
    except BadRecord as exc:  # an unreadable record is reported, not fatal
        return {"ok": False, "summary": f"unreadable verification record: {exc}"}
    if not doc:
        return None
    report = doc.get("report") or {}
    return {
        "ok": bool(report.get("ok")),
        "gpu_verified": bool(report.get("gpu_verified")),
        "when": report.get("when"),
        "summary": report.get("summary"),
        "mode": report.get("mode"),
        # The names of the layers that passed (a fleet row shows them beside GPU / CPU only).
        "layers_passed": [lay["name"] for lay in report.get("layers") or [] if isinstance(lay, dict)
                          and lay.get("status") == "pass" and isinstance(lay.get("name"), str)],
        # The stack that verification checked (the last good state when ok: a later failed attempt
        # that never reached verification does not change it).
        **{k: (doc.get("plan") or {}).get(k) for k in ("tensorflow", "cuda", "cudnn")},
    }


def status(ctx: Context, env_given: Optional[str]) -> Result:
    """The env's steps (done, pending, interrupted) and its last verification; read-only."""
    from tfgpu_install.app.envs import existing_env
    from tfgpu_install.app.rollback import journal_steps
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.env.journal import Journal, step_states

    env = existing_env(ctx, env_given)  # none, or gone: exit 6 (env-not-found), as every command says it
    journal = Journal.for_env(ctx, env)
    entries = journal.entries()
    if not entries:
        return Result(
            data={"env": str(env), "installed": False, "steps": [], "verification": None},
            blocks=[Text(f"no install recorded for {env}", "warn"),
                    Text("install one with: tfgpu-install --profile stable", "dim")],
        )
    states = step_states(entries)
    rows: list[dict[str, str]] = []
    ex = Executor(ctx, env, journal=journal)
    for step in journal_steps(ctx, entries):
        try:
            live = ex.preview(step).status  # done | unchanged | pending
        except TfgpuError as err:
            live = f"problem: {err.message}"
        journaled = states.get(step.id, "-")
        if journaled in ("interrupted", "failed") and live != "done":
            live = journaled
        rows.append({"id": step.id, "state": live, "journal": journaled, "describe": step.describe()})
    verification = _verification(ctx, env)
    blocks: list[Block] = [table(f"status of {env}", ("step", "state", "journal", "what"),
                                 [(r["id"], r["state"], r["journal"], r["describe"]) for r in rows])]
    if verification is None:
        blocks.append(Text("never verified", "warn"))
    else:
        style = "ok" if verification["ok"] else "error"
        gpu = "GPU" if verification.get("gpu_verified") else "CPU only"
        blocks.append(Text(f"last verification ({verification.get('when') or '?'}, {gpu}): "
                           f"{verification.get('summary') or ('passed' if verification['ok'] else 'failed')}", style))
    complete = bool(rows) and all(r["state"] in ("done", "unchanged") for r in rows)
    return Result(
        data={"env": str(env), "installed": True, "complete": complete, "steps": rows, "verification": verification},
        blocks=blocks,
        exit_code=int(ExitCode.OK),
    )
