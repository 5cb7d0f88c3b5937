"""`snapshot restore` and `snapshot bundle` on the screen and in JSON (app/restore.py does the work): the
restore's plan (its question, and the head of its outcome), the env against the snapshot after it, the
bundle made."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.guard.shellquote import command
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, human_bytes, table

if TYPE_CHECKING:
    from tfgpu_install.app.restore import Bundled, ClosingCheck, Restored, RestorePlan
    from tfgpu_install.env.integrity import InstalledCheck
    from tfgpu_install.snapshot.model import Snapshot


def taken_at_line(ctx: Context, taken: str, env_given: bool) -> str:
    """Where the snapshot was taken, when the restore writes elsewhere (only shown: a snapshot from another
    machine or user must not silently choose where this one writes)."""
    if not taken:
        return ""
    how = "" if env_given else f" (pass `{command(ctx, '--env', taken)}` to restore there)"  # a command: quoted
    return f"snapshot was taken at {taken}{how}"


def closing_check_cost(snap: "Snapshot") -> str:
    """The plan's line for the check after the steps (it reads gigabytes on a TensorFlow env)."""
    hashed = sum(1 for p in snap.packages if p.hashes)
    return ("then every installed file is hashed and compared with its RECORD, and each RECORD with the "
            f"snapshot's record of the build; files the install writes from wheels it hash-checks ({hashed} of "
            f"{len(snap.packages)} packages have a hash) are taken as written, the rest are read (seconds per GB)")


def head(ctx: Context, plan: "RestorePlan") -> list[Block]:
    """The restore's plan: what the question shows, and the dry run."""
    snap, choice, taken = plan.snapshot, plan.choice, taken_at_line(ctx, plan.taken_at, plan.env_given)
    blocks: list[Block] = [
        Heading(f"restore snapshot {snap.id} into {plan.env}"),
        Text(f"TensorFlow {choice.tensorflow} on Python {choice.python}, "
             f"{len(snap.packages)} packages" + (f", offline from {plan.bundle}" if plan.bundle else "")),
        *([Text(taken, "dim")] if taken else []),
        table("steps", ("step", "state", "what"), [(s.id, s.status, s.describe) for s in plan.preview.steps]),
        Text(closing_check_cost(snap), "dim"),
    ]
    if plan.warnings:
        blocks.append(Bullets("warnings", plan.warnings, "warn"))
    return blocks


def restored(ctx: Context, done: "Restored") -> Result:
    plan, verdict, ran = done.plan, done.verdict, done.ran
    snap, env, warnings = plan.snapshot, plan.env, list(plan.warnings)
    if ran is None:
        return Result({"env": str(env), "snapshot": snap.id, "taken_at": snap.env.path, "dry_run": True,
                       "steps": plan.preview.to_json(),
                       "warnings": warnings, "checked": list(verdict.checked), "gpu": verdict.gpu},
                      [*head(ctx, plan), Text("dry run: nothing was changed", "dim")])
    from tfgpu_install.app.snapshot import builds_line, files_json
    from tfgpu_install.snapshot.drift import to_jsonable

    report, check = ran.report, ran.closing
    blocks = head(ctx, plan)[:2]
    blocks.append(table("steps", ("step", "state", "what"), [(s.id, s.status, s.describe) for s in report.steps]))
    if warnings:
        blocks.append(Bullets("warnings", tuple(warnings), "warn"))
    if verdict.checked:
        blocks.append(Bullets("host contract met", tuple(verdict.checked), "dim"))
    blocks.append(_verdict(env, snap, check))
    blocks.append(Text(builds_line(check.files, snap) + f"; {_read(check.files)}", "dim"))
    data = {"env": str(env), "snapshot": snap.id, "changed": report.changed, "steps": report.to_json(),
            "identical": check.identical, "drift": to_jsonable(check.drift),
            "installed_files": files_json(check.files, snap), "builds_unknown": list(check.builds_unknown),
            "warnings": warnings, "checked": list(verdict.checked), "gpu": verdict.gpu, "recorded": ran.recorded,
            "rollback_point": ran.rollback_point, "taken_at": snap.env.path}
    code = ExitCode.OK if check.identical is not False else ExitCode.VERIFY_FAILED
    return Result(data, blocks, exit_code=int(code))


def _verdict(env: object, snap: "Snapshot", check: "ClosingCheck") -> Block:
    """The env against the snapshot: the same, the same as far as known (builds unknown), or what differs."""
    files, unknown = check.files, check.builds_unknown
    if check.identical is None:
        return Text(f"{env} matches snapshot {snap.id} in its {check.packages} packages' names and "
                    f"versions and {check.library_files} library files; {files.files} installed files match "
                    f"their RECORDs; the builds of {len(unknown)} package(s) are unknown: the snapshot "
                    f"does not record them ({', '.join(unknown[:3])}{' ...' if len(unknown) > 3 else ''})", "warn")
    if check.identical:
        return Text(f"{env} matches snapshot {snap.id}: {check.packages} packages (the same builds) and "
                    f"{check.library_files} library files identical; {files.files} installed files match "
                    "their records", "ok")
    return Bullets(f"{env} differs from snapshot {snap.id}", tuple(check.drift.lines()) + tuple(files.lines()),
                   "error")


def _read(files: "InstalledCheck") -> str:
    kept = files.hashed - files.read_files
    return (f"{files.hashed} files compared by sha256: {files.read_files} read ({human_bytes(files.read_bytes)})"
            + (f", {kept} taken as this restore wrote them from hash-checked wheels" if kept else ""))


def bundled(ctx: Context, done: "Bundled") -> Result:
    from tfgpu_install.snapshot.bundle import sources_line

    out = done.path
    blocks: list[Block] = [
        Text(f"bundle of snapshot {done.snapshot} in {out}: {len(done.wheels)} wheels for Python {done.python} "
             f"({', '.join(done.platforms)})", "ok"),
        Text(sources_line(done.made_from), "dim"),
        Text("on the offline machine: "
             f"`{command(ctx, 'tfgpu-install', 'snapshot', 'restore', str(out), '--offline', str(out))}`"),
    ]
    return Result({"path": str(out), "snapshot": done.snapshot, "wheels": list(done.wheels),
                   "manifest": str(out / "manifest.json"), "made_from": done.made_from}, blocks)
