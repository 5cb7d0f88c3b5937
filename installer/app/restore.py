"""`snapshot restore` and `snapshot bundle`: rebuild the env a snapshot describes.

Restore = the install's executor fed the snapshot's pinned packages instead of a
resolution: env.create, packages.install (every package ==, with its hashes; pip/uv
--require-hashes when all have one), packages.sync (extras removed), activation.write,
verify.run, snapshot.record, all journaled, so `tfgpu-install rollback` undoes a restore.

Before anything is written the host is checked against the snapshot's contract
(installer/contract.py) and, offline, the bundle against its manifest.

Exit codes: 12 INCOMPATIBLE_HOST (refused: every reason listed), 5 BAD_INPUT (damaged
snapshot or bundle manifest, malformed hash), 8 DOWNLOAD (a package's hash does not match
the snapshot's, the bundle is altered or incomplete, the index is unreachable),
9 VERIFY_FAILED (restored but verification failed, or the result differs from the snapshot),
10 LOCKED. A restore that fails before verification undoes what it did: nothing is left
half-written.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any, Optional

from installer.snapshot import model as snap_mod
from installer.context import Context
from installer.errors import BadInputError, DownloadError, ExitCode, IncompatibleHost, TfgpuError, VerifyFailed
from installer.plan.options import InstallOptions
from installer.plan.restore import conda_restore_extra, pinned_resolution, restore_steps
from installer.report import Block, Bullets, Heading, Result, Text, table
from installer.snapshot.model import Snapshot

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


def _load(args: argparse.Namespace, ctx: Context) -> tuple[Snapshot, Optional[Path]]:
    from installer.snapshot import bundle

    if args.offline:
        bdir = Path(os.path.abspath(args.offline))
        bsnap, _ = bundle.verify(bdir)
        if Path(args.file).is_dir() and os.path.abspath(args.file) == str(bdir):
            return bsnap, bdir
        _, snap = snap_mod.find(ctx.state_dir, args.file)
        if snap.id != bsnap.id:
            raise BadInputError(f"the bundle {bdir} holds snapshot {bsnap.id}, not {snap.id}",
                                f"pass the bundle's own snapshot: --offline {bdir} {bdir}", ref="bundle-other-snapshot")
        return bsnap, bdir
    if Path(args.file).is_dir() and (Path(args.file) / "manifest.json").is_file():
        raise BadInputError(f"{args.file} is a bundle", f"restore it with --offline {args.file}")
    return snap_mod.find(ctx.state_dir, args.file)[1], None


def _placed_files(snap: Snapshot) -> list[str]:
    """Library files no package installs (placed by the cuDNN steps): restore cannot recreate them."""
    return [f.path for f in snap.files if "/site-packages/" not in f.path]


def _python_path(facts: Any, minor: str) -> Optional[str]:
    for p in facts.pythons:
        if p.minor == minor and os.path.exists(p.path):
            return str(p.path)
    return None


# --- restore ------------------------------------------------------------------------------


def restore(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.app.confirm import confirm
    from installer.knowledge.load import knowledge_dir
    from installer.snapshot.contract import check_host, choice_of
    from installer.engine.executor import Executor
    from installer.facts.probe import assumptions_from_args, gather
    from installer.knowledge.load import load_knowledge
    from installer.plan.options import options_to_json

    snap, bundle_dir = _load(args, ctx)
    warnings = _check_hashes(snap)
    knowledge = load_knowledge(knowledge_dir(ctx), cache_dir=ctx.cache_dir)
    facts = gather(ctx, assumptions_from_args(args, ctx), knowledge)
    tools = facts.tools
    conda = bool(tools.conda or tools.mamba or tools.micromamba)
    verdict = check_host(snap, facts, knowledge, allow_cpu=args.allow_cpu, conda_available=conda)
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
    where = args.env or str(snap.env.get("path") or "")
    if not where:
        raise BadInputError(f"snapshot {snap.id} names no env path", "pass --env PATH")
    env = Path(os.path.abspath(os.path.expanduser(where)))
    backend = str(snap.env.get("backend") or "venv")
    backend = backend if backend in ("venv", "conda") else "venv"
    py_path = _python_path(facts, str(choice_of(snap).get("python"))) if backend == "venv" else None
    resolution = pinned_resolution(snap, py_path, cpu_only=not verdict.gpu)
    choice = resolution.choice
    assert choice is not None
    extra = {"find_links": str(bundle_dir / "wheels"), "no_index": "1"} if bundle_dir else {}
    extra.update(conda_restore_extra(snap))  # a conda env's exact CUDA/cuDNN conda packages
    options = InstallOptions(env=env, backend=backend, python=py_path, allow_cpu=not verdict.gpu,
                             index_url=None if bundle_dir else args.index_url, extra=extra)
    require_hashes = bool(snap.packages) and all(p.hashes for p in snap.packages)
    plan = {
        "resolution": resolution.to_json(), "options": options_to_json(options),
        "restore": {"snapshot": snap.id, "require_hashes": require_hashes, "offline": str(bundle_dir or ""),
                    "packages": [{"name": p.name, "version": p.version, "hashes": list(p.hashes)} for p in snap.packages]},
    }
    steps = restore_steps(resolution, options, snap.packages, require_hashes)
    ctx.extra["facts"] = facts
    ex = Executor(ctx, env, plan=plan)
    preview = ex.run(steps, dry_run=True)
    head: list[Block] = [
        Heading(f"restore snapshot {snap.id} into {env}"),
        Text(f"TensorFlow {choice.tensorflow} on Python {choice.python}, "
             f"{len(snap.packages)} packages" + (f", offline from {bundle_dir}" if bundle_dir else "")),
        table("steps", ("step", "state", "what"), [(s.id, s.status, s.describe) for s in preview.steps]),
    ]
    if warnings:
        head.append(Bullets("warnings", tuple(warnings), "warn"))
    if getattr(args, "dry_run", False):
        return Result({"env": str(env), "snapshot": snap.id, "dry_run": True, "steps": preview.to_json(),
                       "warnings": warnings, "checked": list(verdict.checked), "gpu": verdict.gpu},
                      [*head, Text("dry run: nothing was changed", "dim")])
    pending = any(s.status == "pending" for s in preview.steps)
    if pending:
        confirm(ctx, args.yes, head)
    from installer.app.envs import last_env, remember_env

    with ex.lock():
        entries = ex.journal.entries()
        before = entries[-1].seq if entries else 0
        point = _rollback_point(ctx, env, facts) if pending else None
        previous = last_env(ctx)
        remember_env(ctx, env)
        try:
            report = ex.run(steps)
        except VerifyFailed:
            raise  # restored but not working: left in place for `tfgpu-install doctor` or rollback
        except TfgpuError as err:
            try:
                ex.rollback(steps, to_seq=before)
            except TfgpuError:
                raise err  # the journal still holds it: `tfgpu-install rollback` finishes the undo
            if previous is not None:
                remember_env(ctx, previous)
            raise _undone(err, env) from err
    recorded = (ctx.extra.get("results") or {}).get("snapshot.record") or {}
    result = _result(snap, env, report, head, verdict, warnings, recorded.get("id"))
    result.data["rollback_point"] = point
    return result


def _rollback_point(ctx: Context, env: Path, facts: Any) -> Optional[str]:
    """Restoring over an existing env: record what it holds first (a `rollback-point` snapshot),
    so `snapshot restore ID` can bring that state back even after the journal is gone."""
    from installer.snapshot.build import build

    if not (env / "pyvenv.cfg").is_file() and not (env / "conda-meta").is_dir():
        return None
    snap = build(ctx, env, "rollback-point", facts=facts, hashes=False)
    snap_mod.save(ctx.state_dir, snap)
    return snap.id


def _undone(err: TfgpuError, env: Path) -> TfgpuError:
    """The same error, saying the partial restore was undone (a hash mismatch: DOWNLOAD, ref hash-mismatch)."""
    tail = f" (the restore was undone: {env} is as it was before)"
    if any(sign in err.message for sign in _HASH_MISMATCH):
        return DownloadError(
            "a package does not match the hash the snapshot records: " + err.message + tail,
            "the snapshot file was edited or the index serves different files; use an untouched snapshot, "
            "or the index it was exported from (--index-url)",
            ref="hash-mismatch",
        )
    try:
        return type(err)(err.message + tail, err.hint, ref=err.ref, code=err.code)
    except TypeError:  # a subclass with its own constructor: keep it as it is
        return err


def _result(snap: Snapshot, env: Path, report: Any, head: list[Block], verdict: Any,
            warnings: list[str], recorded: Optional[str]) -> Result:
    from installer.snapshot.drift import compare, to_jsonable
    from installer.snapshot.envstate import capture

    live = capture(env)
    old_root = str(snap.env.get("path") or "")
    activation = {k: v.replace(old_root, str(env)) if old_root else v for k, v in snap.activation.items()}
    if snap.format == 1:  # format 1 recorded packages only: files and activation cannot be compared
        d = compare((snap.packages, live.packages), (live.files, live.files), (live.activation, live.activation))
    else:
        # Files no package installs (a placed cuDNN) are not restored: warned about, not compared.
        ours = tuple(f for f in snap.files if "/site-packages/" in f.path)
        theirs = tuple(f for f in live.files if "/site-packages/" in f.path)
        d = compare((snap.packages, live.packages), (ours, theirs), (activation, live.activation))
    blocks = list(head[:2])
    blocks.append(table("steps", ("step", "state", "what"), [(s.id, s.status, s.describe) for s in report.steps]))
    if warnings:
        blocks.append(Bullets("warnings", tuple(warnings), "warn"))
    if verdict.checked:
        blocks.append(Bullets("host contract met", tuple(verdict.checked), "dim"))
    code = ExitCode.OK
    if d.clean:
        blocks.append(Text(f"{env} matches snapshot {snap.id}: {len(live.packages)} packages and "
                           f"{len(live.files)} library files identical", "ok"))
    else:
        blocks.append(Bullets(f"{env} differs from snapshot {snap.id}", tuple(d.lines()), "error"))
        code = ExitCode.VERIFY_FAILED
    data = {"env": str(env), "snapshot": snap.id, "changed": report.changed, "steps": report.to_json(),
            "identical": d.clean, "drift": to_jsonable(d), "warnings": warnings, "checked": list(verdict.checked),
            "gpu": verdict.gpu, "recorded": recorded}
    return Result(data, blocks, exit_code=int(code))


# --- bundle -------------------------------------------------------------------------------


def bundle(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.snapshot import bundle as bundle_mod

    _, snap = snap_mod.find(ctx.state_dir, args.file)
    out = Path(os.path.abspath(args.output))
    manifest = bundle_mod.make(ctx, snap, out, index_url=args.index_url)
    wheels = sorted(k for k in manifest["files"] if k.startswith("wheels/"))
    blocks: list[Block] = [
        Text(f"bundle of snapshot {snap.id} in {out}: {len(wheels)} wheels for Python {manifest['python']} "
             f"({', '.join(manifest['platforms'])})", "ok"),
        Text(f"on the offline machine: tfgpu-install snapshot restore {out} --offline {out}"),
    ]
    return Result({"path": str(out), "snapshot": snap.id, "wheels": wheels, "manifest": str(out / "manifest.json")},
                  blocks)
