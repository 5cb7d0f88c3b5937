"""`snapshot restore` and `snapshot bundle`: rebuild the env a snapshot describes.

Restore = the install's executor fed the snapshot's pinned packages instead of a
resolution: env.create, packages.install (every package ==, with its hashes; pip/uv
--require-hashes when all have one), packages.sync (extras removed), activation.write,
verify.run, snapshot.record, all journaled, so `tfgpu-install rollback` undoes a restore.

Before anything is written the host is checked against the snapshot's contract
(tfgpu_install/contract.py) and, offline, the bundle against its manifest.

Exit codes: 12 INCOMPATIBLE_HOST (refused: every reason listed), 5 BAD_INPUT (damaged
snapshot or bundle manifest, malformed hash), 8 DOWNLOAD (a package's hash does not match
the snapshot's, the bundle is altered or incomplete, the index is unreachable),
9 VERIFY_FAILED (restored but verification failed, or the result differs from the snapshot),
10 LOCKED. A restore that fails before verification undoes what it did: nothing is left
half-written.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport
from tfgpu_install.env.layout import user_path
from tfgpu_install.errors import BadInputError, DownloadError, IncompatibleHost, TfgpuError
from tfgpu_install.facts.model import AssumeFlags
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.guard.shellquote import command
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.plan.restore import conda_restore_extra, pinned_resolution, restore_steps
from tfgpu_install.snapshot import model as snap_mod
from tfgpu_install.snapshot.model import Snapshot

if TYPE_CHECKING:
    from tfgpu_install.env.integrity import InstalledCheck
    from tfgpu_install.resolver.model import Choice
    from tfgpu_install.snapshot.contract import Verdict
    from tfgpu_install.snapshot.drift import Drift

_HASH = re.compile(r"^(sha256|sha384|sha512):[0-9a-f]{64,128}$")
_HASH_MISMATCH = ("Hash mismatch", "DO NOT MATCH THE HASHES", "hash mismatch")


def _check_hashes(snap: Snapshot) -> list[str]:
    """Malformed hashes refuse (BAD_INPUT); missing ones are warnings."""
    bad = [f"{p.requirement()}: {h!r}" for p in snap.packages for h in p.hashes if not _HASH.match(h)]
    if bad:
        raise BadInputError(f"snapshot {snap.id} has malformed hashes: " + "; ".join(bad[:5]),
                            "hashes look like sha256:<64 hex digits>; export the snapshot again", ref="bad-hash")
    missing = [p.requirement() for p in snap.packages if not p.hashes]
    if not missing:
        return []
    why = "a format-1 snapshot records no hashes" if snap.format == 1 else "no hash recorded"
    return [f"{why}: {len(missing)} package(s) restored without a hash check ({', '.join(missing[:5])}"
            + (" ..." if len(missing) > 5 else "") + ")"]


def _hashes_from_elsewhere(loaded: Snapshot, hashed: Snapshot) -> list[str]:
    """Say so when an old snapshot's packages are checked against hashes it does not record
    itself (the install's pins, the index's pages): the snapshot vouches for none of them."""
    own = {p.key for p in loaded.packages if p.hashes}
    filled = [p.requirement() for p in hashed.packages if p.hashes and p.key not in own]
    if loaded.format != 1 or not filled:
        return []
    return [f"a format-1 snapshot records no hashes: {len(filled)} package(s) are checked against hashes "
            "from elsewhere (the pins its install recorded, the package index's pages)"]


def _load(req: RestoreRequest, ctx: Context) -> tuple[Snapshot, Optional[Path]]:
    from tfgpu_install.snapshot import bundle

    if req.offline:
        bdir = Path(os.path.abspath(req.offline))
        bsnap, _ = bundle.verify(bdir)
        if Path(req.file).is_dir() and os.path.abspath(req.file) == str(bdir):
            return bsnap, bdir
        _, snap = snap_mod.find(ctx.state_dir, req.file)
        if snap.id != bsnap.id:
            own = command(ctx, "tfgpu-install", "snapshot", "restore", str(bdir), "--offline", str(bdir))
            raise BadInputError(f"the bundle {bdir} holds snapshot {bsnap.id}, not {snap.id}",
                                f"pass the bundle's own snapshot: `{own}`", ref="bundle-other-snapshot")
        return bsnap, bdir
    if Path(req.file).is_dir() and (Path(req.file) / "manifest.json").is_file():
        again = command(ctx, "tfgpu-install", "snapshot", "restore", req.file, "--offline", req.file)
        raise BadInputError(f"{req.file} is a bundle", f"restore it with `{again}`")
    return snap_mod.find(ctx.state_dir, req.file)[1], None


def hashed_pins(snap: Snapshot) -> Snapshot:
    """The snapshot with each package that has no hash of its own given the hash its install
    pinned (the resolution's choice.hashes, matrix.yaml pin_hashes) where the version is that
    pin's: a known-good snapshot records those there, not per package. The installer then checks
    those wheels, and the closing check need not read what it wrote from them."""
    from dataclasses import replace

    from tfgpu_install.env.layout import canonical_name
    from tfgpu_install.snapshot.contract import choice_of

    c = choice_of(snap)  # typed by the reader: pins name -> version, hashes name -> ["sha256:..."]
    pins = {canonical_name(k): v for k, v in c.pins.items()}
    hashes = {canonical_name(k): tuple(v) for k, v in c.hashes.items() if v and all(_HASH.match(h) for h in v)}
    packages = tuple(replace(p, hashes=hashes[p.key]) if not p.hashes and p.key in hashes
                     and pins.get(p.key) == p.version else p for p in snap.packages)
    return replace(snap, packages=packages)


def cached_index_hashes(ctx: Context, snap: Snapshot, index_url: Optional[str]) -> tuple[Snapshot, list[str]]:
    """The snapshot with each package that still has no hash given the sha256 the package index
    publishes for it, as uv has the index's pages cached (`uv pip compile --offline`: no request
    leaves the machine). uv then checks those wheels, and the closing check need not read what it
    wrote from them. Nothing cached, or uv failing: the snapshot as it is (those files are read)."""
    from dataclasses import replace

    from tfgpu_install.snapshot.contract import choice_of
    from tfgpu_install.snapshot.pylock import compile_lock, with_hashes

    bare = [p for p in snap.packages if not p.hashes]
    if not bare:
        return snap, []
    try:
        lock = compile_lock(ctx, bare, choice_of(snap).python or "3", index_url=index_url, glibc=snap.host.glibc,
                            arch=snap.host.arch, offline=True, timeout=120)
    except TfgpuError:
        return snap, []
    found = {p.key: p for p in with_hashes(bare, lock) if p.hashes and all(_HASH.match(h) for h in p.hashes)}
    if not found:
        return snap, []
    packages = tuple(replace(p, hashes=found[p.key].hashes) if p.key in found else p for p in snap.packages)
    return replace(snap, packages=packages), [
        f"the hashes of {len(found)} package(s) are the package index's, from the pages uv has cached "
        "(the snapshot records none for them): uv checks those wheels against them"]


def _placed_files(snap: Snapshot) -> list[str]:
    """Library files no package installs (placed by the cuDNN steps): restore cannot recreate them."""
    return [f.path for f in snap.files if "/site-packages/" not in f.path]


def _python_path(facts: Any, minor: str) -> Optional[str]:
    for p in facts.pythons:
        if p.minor == minor and os.path.exists(p.path):
            return str(p.path)
    return None


# --- restore ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreRequest:
    file: str  # a snapshot file, a stored id, or (with offline) the bundle dir
    env: Optional[str] = None
    offline: Optional[str] = None  # a bundle made by `snapshot bundle`
    index_url: Optional[str] = None
    allow_cpu: bool = False
    assume: AssumeFlags = field(default_factory=AssumeFlags)
    yes: bool = False  # no question (the command asks it: commands/snapshot.py)
    dry_run: bool = False
    progress: bool = False


@dataclass(frozen=True)
class BundleRequest:
    file: str
    output: str
    index_url: Optional[str] = None


@dataclass(frozen=True)
class RestorePlan:
    """What a restore is about to do, asked before its first change (commands/snapshot_restore.py words it);
    also the head of its outcome."""

    snapshot: Snapshot  # with the hashes it is checked against
    env: Path
    choice: Choice  # the snapshot's TensorFlow and Python
    bundle: Optional[Path]  # offline from this bundle
    taken_at: str  # where the snapshot was taken, when that is not env ("": it is, or unknown)
    env_given: bool  # --env was given (else the plan says how to restore where it was taken)
    warnings: tuple[str, ...]
    preview: ExecReport  # each step's state


@dataclass(frozen=True)
class ClosingCheck:
    """The restored env against the snapshot: its packages, library files and activation, every installed
    file against its RECORD and each RECORD against the snapshot's record of the build."""

    drift: Drift
    files: InstalledCheck
    builds_unknown: tuple[str, ...]  # packages whose build the snapshot does not record
    packages: int  # in the env now
    library_files: int  # in the env now
    identical: Optional[bool]  # None: what could be compared matches, but some builds are unknown


@dataclass(frozen=True)
class Ran:
    """A restore that ran (not a dry run)."""

    report: ExecReport  # the run's steps (nothing was pending: the preview's)
    closing: ClosingCheck
    recorded: Optional[str]  # the known-good snapshot recorded
    rollback_point: Optional[str]  # the snapshot recorded before the first change


@dataclass(frozen=True)
class Restored:
    """`snapshot restore`'s outcome (commands/snapshot_restore.py renders it)."""

    plan: RestorePlan  # its preview: each step's state before the run
    verdict: Verdict  # the host against the snapshot's contract (met: a refusal raises)
    ran: Optional[Ran]  # None: a dry run


def restore(ctx: Context, req: RestoreRequest, ask: Callable[[RestorePlan], None]) -> Restored:
    """Rebuild the env `req.file` describes, after checking this host against its contract; `ask` is called
    before the first change and stops it by raising (commands/snapshot.py: the question, or -y)."""
    from tfgpu_install.app.provision import ProvisionRequest, provision
    from tfgpu_install.facts.probe import assumptions, gather
    from tfgpu_install.knowledge.load import knowledge_dir, load_knowledge
    from tfgpu_install.plan.journaled import JournaledPlan, RestoreRecord
    from tfgpu_install.snapshot.contract import check_host, choice_of

    loaded, bundle_dir = _load(req, ctx)
    snap = hashed_pins(loaded)
    notes: list[str] = []
    if bundle_dir is None:
        snap, notes = cached_index_hashes(ctx, snap, req.index_url)
    warnings = _check_hashes(snap) + _hashes_from_elsewhere(loaded, snap) + notes
    knowledge = load_knowledge(knowledge_dir(ctx), cache_dir=ctx.cache_dir)
    facts = gather(ctx, assumptions(req.assume, ctx), knowledge)
    tools = facts.tools
    conda = bool(tools.conda or tools.mamba or tools.micromamba)
    verdict = check_host(snap, facts, knowledge, allow_cpu=req.allow_cpu, conda_available=conda)
    if not verdict.ok:
        raise IncompatibleHost(
            f"snapshot {snap.id} cannot be restored on this host:\n  - " + "\n  - ".join(verdict.refusals),
            hint="restore it on a machine that meets its contract (`tfgpu-install snapshot show "
            f"{snap.id}`), or install for this machine instead: `tfgpu-install --profile stable`",
        )
    warnings += list(verdict.warnings)
    placed = _placed_files(snap)
    if placed:
        warnings.append(f"{len(placed)} library file(s) outside the packages (a cuDNN placed from a redist or "
                        f"archive, e.g. {placed[0]}) are not restored: run `tfgpu-install --env ENV "
                        "--cudnn-source redist|archive` after the restore to place them again")
    backend = str(snap.env.backend or "venv")
    backend = backend if backend in ("venv", "conda") else "venv"
    py_path = _python_path(facts, choice_of(snap).python) if backend == "venv" else None
    resolution = pinned_resolution(snap, py_path, cpu_only=not verdict.gpu)
    choice = resolution.choice
    assert choice is not None
    env, taken_at = _target_env(ctx, req.env, snap, choice)
    extra = {"find_links": str(bundle_dir / "wheels"), "no_index": "1"} if bundle_dir else {}
    extra.update(conda_restore_extra(snap))  # a conda env's exact CUDA/cuDNN conda packages
    from tfgpu_install.plan.additions import recorded as recorded_requirements

    # The user's own requirements stay "added" in the restored env (upgrade carries them).
    options = InstallOptions(env=env, backend=backend, python=py_path, allow_cpu=not verdict.gpu,
                             index_url=None if bundle_dir else req.index_url, extra=extra,
                             with_requirements=recorded_requirements(snap.resolution.added))
    require_hashes = bool(snap.packages) and all(p.hashes for p in snap.packages)
    plan = JournaledPlan(resolution, options,
                         RestoreRecord(snap.id, require_hashes, str(bundle_dir or ""), snap.packages)).to_json()

    def planned(preview: ExecReport) -> RestorePlan:
        return RestorePlan(snap, env, choice, bundle_dir, taken_at, bool(req.env), tuple(warnings), preview)

    started_ns = time.time_ns()
    try:
        done = provision(ctx, ProvisionRequest(
            env=env, steps=restore_steps(resolution, options, snap.packages, require_hashes, facts), plan=plan,
            ask=lambda preview: ask(planned(preview)), facts=facts, dry_run=req.dry_run, progress=req.progress,
            undo_on_failure=True, make_default=True,
        ))
    except TfgpuError as err:
        raise _hash_mismatch(err) from err
    if req.dry_run:
        return Restored(planned(done.preview), verdict, None)
    recorded = done.results.get("snapshot.record") or {}
    closing = _closing_check(ctx, snap, env, _Closing(started_ns, req.progress))
    return Restored(planned(done.preview), verdict,
                    Ran(done.report or done.preview, closing, recorded.get("id"), done.rollback_point))


def _target_env(ctx: Context, given: Optional[str], snap: Snapshot, choice: Any) -> tuple[Path, str]:
    """--env, else the default env location for the snapshot's combination (as install picks it).
    The path the snapshot was taken at is only shown: a snapshot from another machine or user
    must not silently choose where this one writes. Returns (env, where the snapshot was taken when
    that is elsewhere, else "")."""
    from tfgpu_install.app.envs import default_env_path

    env = user_path(given) if given else default_env_path(ctx, choice)
    taken = snap.env.path or ""
    if not taken or os.path.abspath(taken) == str(env):
        return env, ""
    return env, taken


def _hash_mismatch(err: TfgpuError) -> TfgpuError:
    """pip/uv refusing a package whose hash differs from the snapshot's: DOWNLOAD, ref hash-mismatch."""
    if not any(sign in err.message for sign in _HASH_MISMATCH):
        return err
    return DownloadError(
        "a package does not match the hash the snapshot records: " + err.message,
        "the snapshot file was edited or the index serves different files; use an untouched snapshot, "
        "or the index it was exported from (--index-url)",
        ref="hash-mismatch",
    )


@dataclass(frozen=True)
class _Closing:
    started_ns: int  # when the restore began: what its install wrote since is trusted as written
    progress: bool


def _builds_unknown(snap: Snapshot) -> list[str]:
    """The snapshot's packages whose build it does not record (a snapshot older than build records)."""
    return [p.requirement() for p in snap.packages if not p.content and p.key not in snap_mod.SEEDED]


def _closing_check(ctx: Context, snap: Snapshot, env: Path, closing: _Closing) -> ClosingCheck:
    from tfgpu_install.snapshot.drift import compare
    from tfgpu_install.snapshot.envstate import capture

    live = capture(env)
    old_root = snap.env.path or ""
    activation = {k: v.replace(old_root, str(env)) if old_root else v for k, v in snap.activation.items()}
    if snap.format == 1:  # format 1 recorded packages only: files and activation cannot be compared
        d = compare((snap.packages, live.packages), (live.files, live.files), (live.activation, live.activation))
    else:
        # Files no package installs (a placed cuDNN) are not restored: warned about, not compared.
        ours = tuple(f for f in snap.files if "/site-packages/" in f.path)
        theirs = tuple(f for f in live.files if "/site-packages/" in f.path)
        d = compare((snap.packages, live.packages), (ours, theirs), (activation, live.activation))
    from tfgpu_install.app.snapshot import installed_files

    # every file against its RECORD, and each RECORD against the snapshot's build record
    files = installed_files(ctx, env, full=True, expected=snap.builds(), trusted_since=closing.started_ns,
                            progress=closing.progress)
    unknown = _builds_unknown(snap)
    identical: Optional[bool] = d.clean and files.clean
    if identical and unknown:
        identical = None  # what could be compared matches; whether these are the same builds is not known
    return ClosingCheck(d, files, tuple(unknown), len(live.packages), len(live.files), identical)


# --- bundle -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundled:
    """The bundle as made (commands/snapshot_restore.py renders it)."""

    path: Path
    snapshot: str  # its id
    wheels: tuple[str, ...]  # wheels/<file>, sorted
    python: str
    platforms: tuple[str, ...]
    made_from: JSONObject  # where its wheels came from


def bundle(ctx: Context, req: BundleRequest) -> Bundled:
    from tfgpu_install.snapshot import bundle as bundle_mod

    _, snap = snap_mod.find(ctx.state_dir, req.file)
    out = Path(os.path.abspath(req.output))
    manifest = bundle_mod.make(ctx, snap, out, index_url=req.index_url)
    wheels = sorted(k for k in manifest["files"] if k.startswith("wheels/"))
    return Bundled(out, snap.id, tuple(wheels), manifest["python"], tuple(manifest["platforms"]),
                   manifest.get("made_from") or {})
