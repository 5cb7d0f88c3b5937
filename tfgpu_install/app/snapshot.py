"""The snapshot and check commands' work (the CLI modules stay thin)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, TfgpuError, UsageError
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.guard.shellquote import command
from tfgpu_install.snapshot import model as snap_mod
from tfgpu_install.snapshot.document import Verification

if TYPE_CHECKING:
    from tfgpu_install.env.integrity import InstalledCheck
    from tfgpu_install.snapshot.drift import Drift


def _facts(ctx: Context) -> Any:
    """This host's facts; TFGPU_OVERRIDE_* apply."""
    from tfgpu_install.facts.model import AssumeFlags
    from tfgpu_install.facts.probe import assumptions, gather

    return gather(ctx, assumptions(AssumeFlags(), ctx))


def _env_path(ctx: Context, given: Optional[str]) -> Path:
    from tfgpu_install.app.envs import existing_env

    return existing_env(ctx, given)


def _last_verification(ctx: Context, env: Path) -> Optional[Verification]:
    found = snap_mod.latest_for_env(ctx.state_dir, env)
    return found[1].verification if found else None


@dataclass(frozen=True)
class ExportRequest:
    env: Optional[str] = None  # None: the last env installed
    output: Optional[str] = None  # -o FILE; the native format defaults to the store
    format: str = "tfgpu"  # tfgpu | requirements | conda | pylock
    no_hashes: bool = False
    index_url: Optional[str] = None


@dataclass(frozen=True)
class Exported:
    """`snapshot export`'s outcome (commands/snapshot.py renders it)."""

    env: Path
    snap: snap_mod.Snapshot
    format: str
    path: Path  # where it was written


def export(ctx: Context, req: ExportRequest) -> Exported:
    from tfgpu_install.plan.journaled import recorded_plan
    from tfgpu_install.snapshot.build import build
    from tfgpu_install.snapshot.exports import FORMATS

    env = _env_path(ctx, req.env)
    fmt = req.format
    form = FORMATS.get(fmt)
    if form is None:
        raise UsageError(f"no export format {fmt!r}", "one of: " + ", ".join(FORMATS))
    if form.render is not None and not req.output:
        raise UsageError(f"--format {fmt} needs -o FILE", "name the file to write, e.g. -o requirements.txt")
    snap = build(
        ctx, env, "export", facts=_facts(ctx), verification=_last_verification(ctx, env),
        resolution=recorded_plan(ctx, env),
        hashes=not req.no_hashes and form.look_up_hashes, index_url=req.index_url,
    )
    if form.render is None:
        if req.output:
            out = Path(req.output)
            snap_mod.write(out, snap)
        else:
            out = snap_mod.save(ctx.state_dir, snap)
    else:
        assert req.output is not None
        from tfgpu_install.files import atomic_write

        out = Path(req.output)
        atomic_write(out, form.render(ctx, snap, req.index_url))
    return Exported(env, snap, fmt, out)


def list_(ctx: Context) -> snap_mod.Store:
    """The store: its readable snapshots and its damaged files (commands/snapshot.py lists them)."""
    return snap_mod.scan(ctx.state_dir)


def show(ctx: Context, ref: str) -> tuple[Path, snap_mod.Snapshot]:
    """One snapshot, by id, unique id prefix or file: where it is, and it."""
    return snap_mod.find(ctx.state_dir, ref)


@dataclass(frozen=True)
class Compared:
    """Two snapshots and what differs between them."""

    a: snap_mod.Snapshot
    b: snap_mod.Snapshot
    drift: Drift


def diff(ctx: Context, ref_a: str, ref_b: str) -> Compared:
    """Two snapshots compared (the command exits 0 when the same, 11 (DRIFT) when they differ: diff(1)'s 0/1).
    Activation is compared as what it sets (the env's own path taken out)."""
    from tfgpu_install.snapshot.drift import compare, relative_activation

    _, a = snap_mod.find(ctx.state_dir, ref_a)
    _, b = snap_mod.find(ctx.state_dir, ref_b)
    activation = (relative_activation(a.activation, a.env.path),
                  relative_activation(b.activation, b.env.path))
    return Compared(a, b, compare((a.packages, b.packages), (a.files, b.files), activation, (a.host, b.host)))


def installed_files(ctx: Context, env: Path, full: bool = False, *, expected: Optional[Any] = None,
                    trusted_since: Optional[int] = None, progress: bool = False) -> Any:
    """The env's installed files against their distributions' records (env/integrity.py), each
    record first against what the snapshot says it must be (`expected`: Snapshot.builds()), with
    the hashes of unchanged files remembered in the env's state dir. trusted_since (the wall clock
    in ns when a restore began): what its install wrote from hash-checked wheels is not read again.
    progress: a live line with the files and bytes hashed (a terminal; never under --json)."""
    from tfgpu_install.env.integrity import check_installed, written_since
    from tfgpu_install.env.state import hash_cache, written_list

    trusted = written_since(written_list(ctx, env), trusted_since) if trusted_since is not None else None
    bar = _HashBar() if progress else None
    try:
        return check_installed(env, full=full, cache=hash_cache(ctx, env), expected=expected, trusted=trusted,
                               progress=bar)
    finally:
        if bar is not None:
            bar.close()


class _HashBar:
    """check_installed's progress as the console's live row: files and bytes hashed, of how many."""

    def __init__(self) -> None:
        from tfgpu_install.console import Progress

        self.sink = Progress(enabled=True)

    def __call__(self, files: int, done: int, all_files: int, total: int) -> None:
        self.sink(f"checking installed files: {files}/{all_files} hashed", done, max(total, 101))

    def close(self) -> None:
        self.sink.close()


def builds_line(files: Any, snap: snap_mod.Snapshot) -> str:
    """What the check could say of each distribution's build (env/builds.py): compared with the
    snapshot's record, or unknown (and why)."""
    if snap.builds() is None:
        return (f"builds: unknown: snapshot {snap.id} records none (it predates build records), so another "
                "build of the same version would not be seen")
    unknown = [n for n in files.builds_unknown if n not in snap_mod.SEEDED]
    line = f"builds: {files.builds_checked} distributions' RECORDs compared with the snapshot's record"
    if unknown:
        line += f"; unknown for {len(unknown)} the snapshot does not describe ({', '.join(unknown[:5])}" + (
            " ..." if len(unknown) > 5 else "") + ")"
    return line


def files_json(files: InstalledCheck, snap: snap_mod.Snapshot) -> JSONObject:
    """The file check's JSON, its builds said against this snapshot (the seeded tools left out)."""
    data = files.to_json()
    data["builds"] = {"checked": files.builds_checked,
                      "unknown": [n for n in files.builds_unknown if n not in snap_mod.SEEDED],
                      "recorded": snap.builds() is not None}
    return data


# The steps whose product is a file of the tool's own (not a distribution's): their journaled plan
# says what was written, their check() whether it is still there as written.
_OWN_FILE_STEPS = ("activation.write", "shell-rc.write", "ldconfig.system")


def own_files_changed(ctx: Context, env: Path) -> list[str]:
    """The tool's own files (activation blocks and launcher, shell rc blocks, the ld.so.conf.d
    entry) that no longer hold what the journal's steps wrote: "step: what it wrote"."""
    from tfgpu_install.app.rollback import journal_steps
    from tfgpu_install.env.journal import Journal, step_states

    entries = Journal.for_env(ctx, env).entries()
    states = step_states(entries)
    out = []
    for step in journal_steps(ctx, entries):
        if step.id not in _OWN_FILE_STEPS or states.get(step.id) != "done":
            continue
        try:
            ok = step.check(ctx)
        except (OSError, TfgpuError):
            ok = False
        if not ok:
            out.append(f"{step.id}: {step.describe()}")
    return out


@dataclass(frozen=True)
class Checked:
    """`check`'s findings (commands/check.py renders them): the env against its known-good snapshot `good`
    (drift), its installed files against their records, the tool's own files that changed."""

    env: Path
    good: snap_mod.Snapshot
    drift: Drift
    files: InstalledCheck
    own_changed: tuple[str, ...]
    full: bool  # every file hashed
    store: snap_mod.Store  # its damaged files are warnings

    @property
    def clean(self) -> bool:
        return self.drift.clean and self.files.clean and not self.own_changed


def check(ctx: Context, env_given: Optional[str], full: bool = False, progress: bool = False) -> Checked:
    """Drift between the live env and its last known-good snapshot, and its installed files
    against their records (the command exits DRIFT when either differs)."""
    from tfgpu_install.snapshot.build import host_contract
    from tfgpu_install.snapshot.drift import compare
    from tfgpu_install.snapshot.envstate import capture

    env = _env_path(ctx, env_given)
    # The last known-good record; an env never installed by this tool can be watched from an export.
    store = snap_mod.scan(ctx.state_dir)
    found = snap_mod.latest_for_env(ctx.state_dir, env, store=store) or snap_mod.latest_for_env(
        ctx.state_dir, env, "export", store=store)
    if found is None:
        raise BadInputError(
            f"no known-good snapshot for {env}",
            "a successful install records one; or record the env as it is now with "
            f"`{command(ctx, 'tfgpu-install', 'snapshot', 'export', '--env', str(env))}`"
            + "".join(f"; {w}" for w in store.warnings()),
            ref="no-snapshot",
        )
    _, good = found
    live = capture(env, previous_files={f.path: f for f in good.files})
    host = host_contract(_facts(ctx)) if good.host.driver else None
    d = compare(
        (good.packages, live.packages), (good.files, live.files), (good.activation, live.activation),
        (good.host, host) if host is not None else None,
    )
    files = installed_files(ctx, env, full, expected=good.builds(), progress=progress)
    return Checked(env, good, d, files, tuple(own_files_changed(ctx, env)), full, store)
