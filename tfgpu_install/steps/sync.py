"""Step packages.sync: make an env hold exactly a snapshot's distributions (extras removed).

Restoring over an existing env installs every pinned package, then this step removes
what the snapshot does not list. Removal moves each extra distribution's files (from
its RECORD) into a stash under the env's state dir instead of deleting them, so undo
puts them back byte-identical without a package index (a restore may be offline, and
an extra may have come from a local build no index has).

Killed mid-apply: the plan of moves is written before the first move; undo moves back
whatever reached the stash.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from importlib.metadata import Distribution
from pathlib import Path
from typing import Any, Iterable

from tfgpu_install.context import Context
from tfgpu_install.env.layout import canonical_name
from tfgpu_install.env.target import TargetEnv
from tfgpu_install.errors import StepFailed
from tfgpu_install.files import atomic_write
from tfgpu_install.guard.jsondoc import items, text
from tfgpu_install.guard.shellquote import command
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint


def extras(env: TargetEnv, keep: Iterable[str]) -> dict[str, "Distribution"]:
    """canonical name -> importlib Distribution of every installed distribution not in `keep`."""
    from importlib.metadata import distributions

    wanted = {canonical_name(n) for n in keep}
    sp = env.site_packages()
    out: dict[str, Distribution] = {}
    if not sp.is_dir():
        return out
    for dist in distributions(path=[str(sp)]):
        name = dist.metadata["Name"] if dist.metadata else None
        if name and canonical_name(name) not in wanted:
            out.setdefault(canonical_name(name), dist)
    return out


def _dist_paths(env: TargetEnv, dist: Any) -> list[Path]:
    """Every file the distribution installed (its RECORD), plus its .dist-info directory and
    the __pycache__ entries of its modules; only paths inside the env."""
    root = os.path.realpath(env.path)
    sp = env.site_packages()
    paths: list[Path] = []
    for f in dist.files or ():
        p = Path(os.path.normpath(sp / str(f)))
        if not os.path.realpath(p).startswith(root + os.sep):
            continue  # a RECORD pointing outside the env is not ours to move
        if p.is_file() or p.is_symlink():
            paths.append(p)
        if p.suffix == ".py":
            cache = p.parent / "__pycache__"
            paths += sorted(cache.glob(f"{p.stem}.*.pyc")) if cache.is_dir() else []
    info = Path(str(dist._path)) if hasattr(dist, "_path") else None  # the .dist-info dir itself
    if info is not None and info.is_dir():
        paths += [q for q in sorted(info.rglob("*")) if q.is_file() and q not in paths]
    return sorted(set(paths))


class SyncPackages(Step):
    id = "packages.sync"

    def __init__(self, env: TargetEnv, keep: Iterable[str]) -> None:
        self.env = env
        self.keep = sorted({canonical_name(n) for n in keep})

    def describe(self) -> str:
        return f"remove distributions the snapshot does not list from {self.env.path}"

    def touches(self, ctx: Context) -> list[str]:
        # Not the plan file: the executor would delete it (it did not exist before) ahead of
        # undo, and undo needs it to move a killed sync's files back.
        return [str(self.env.site_packages())]

    def _plan_file(self, ctx: Context) -> Path:
        from tfgpu_install.env.state import env_state_dir

        return env_state_dir(ctx, self.env.path) / "sync-plan.json"

    def check(self, ctx: Context) -> bool:
        if not self.env.site_packages().is_dir():
            return False  # no env yet: a dry run shows the step as to do, the run finds it done after install
        return not self._plan_file(ctx).exists() and not extras(self.env, self.keep)

    def apply(self, ctx: Context) -> UndoRecord:
        from tfgpu_install.env.state import env_state_dir

        plan_file = self._plan_file(ctx)
        if plan_file.exists():  # resume after a kill: finish the same plan
            plan = json.loads(plan_file.read_text())
        else:
            found = extras(self.env, self.keep)
            stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
            stash = env_state_dir(ctx, self.env.path) / f"sync-stash-{stamp}-{os.getpid()}"
            moves = []
            for _name, dist in sorted(found.items()):
                for p in _dist_paths(self.env, dist):
                    moves.append([str(p), str(stash / p.relative_to(self.env.path))])
            plan = {"stash": str(stash), "moves": moves,
                    "removed": [f"{d.metadata['Name']}=={d.version}" for _, d in sorted(found.items())]}
            atomic_write(plan_file, json.dumps(plan, indent=1))
        for i, (src, dst) in enumerate(plan["moves"]):
            s, d = Path(src), Path(dst)
            if s.exists() or s.is_symlink():
                d.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(s), str(d))  # a rename on the same filesystem
            if i == 0:
                checkpoint(ctx, self.id, "middle")
        _prune_empty_dirs(self.env.site_packages(), [Path(s).parent for s, _ in plan["moves"]])
        left = extras(self.env, self.keep)
        if left:
            raise StepFailed(
                f"could not remove {', '.join(sorted(left))} from {self.env.path} "
                "(their files are not listed in RECORD)",
                hint=f"remove them with `{command(ctx, str(self.env.python), '-m', 'pip', 'uninstall', 'NAME')}`, "
                "then run the restore again",
            )
        plan_file.unlink(missing_ok=True)
        return {"stash": plan["stash"], "moves": plan["moves"], "removed": plan["removed"]}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        plan_file = self._plan_file(ctx)
        if record.get("partial"):
            if not plan_file.exists():
                return  # killed before planning: nothing moved
            record = json.loads(plan_file.read_text())
        moves = [(m[0], m[1]) for m in items(record, "moves")
                 if isinstance(m, list) and len(m) == 2 and isinstance(m[0], str) and isinstance(m[1], str)]
        for src, dst in reversed(moves):
            s, d = Path(src), Path(dst)
            if d.exists() or d.is_symlink():
                s.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(d), str(s))
        stash = text(record, "stash")
        if stash and Path(stash).is_dir():
            shutil.rmtree(stash, ignore_errors=True)
        plan_file.unlink(missing_ok=True)


def _prune_empty_dirs(stop: Path, dirs: Iterable[Path]) -> None:
    """Remove directories the moves left empty (deepest first), never `stop` or above."""
    stop = Path(os.path.abspath(stop))
    for d in sorted({Path(os.path.abspath(x)) for x in dirs}, key=lambda p: len(p.parts), reverse=True):
        cur = d
        while cur != stop and stop in cur.parents:
            try:
                leftovers = list(cur.iterdir())
            except OSError:
                break
            if all(p.name == "__pycache__" and p.is_dir() and not any(p.iterdir()) for p in leftovers):
                for p in leftovers:
                    p.rmdir()
                try:
                    cur.rmdir()
                except OSError:
                    break
                cur = cur.parent
            else:
                break
