"""`envs remove PATH`: take away an env this tool made, through its journal, exactly as a rollback
does (the same lock, question and undo: the env's directory, its shell-rc block, its ld.so.conf.d
entry). An env the tool did not create is refused: it only removes what it made."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.disksize import TreeUsage
from tfgpu_install.errors import BadInputError
from tfgpu_install.guard.jsondoc import obj

if TYPE_CHECKING:
    from tfgpu_install.engine.executor import ExecReport


@dataclass(frozen=True)
class RemoveRequest:
    env: str
    yes: bool = False
    wait: bool = False
    dry_run: bool = False


def created_by_us(entries: list[Any]) -> bool:
    """The journal's current epoch holds an env.create that made the directory (not one that found
    it): done with "created", or begun where nothing was (killed before it could say it was done)."""
    from tfgpu_install.env.journal import open_entries

    def made(e: Any) -> bool:
        if e.step != "env.create":
            return False
        if e.event == "done":
            return bool((e.data.get("undo") or {}).get("created"))
        pre = e.data.get("pre")
        return e.event == "begin" and isinstance(pre, list) and bool(pre) and all(
            isinstance(item, dict) and item.get("kind") == "missing" for item in pre)

    return any(made(e) for e in open_entries(entries))


def not_the_env(entries: list[Any], env: Path) -> Optional[str]:
    """Why what is at `env` now is not the directory env.create made (env/ownership.py: device,
    inode, real path, marker; a record from before identities: a venv's or conda's own directory,
    not a link); None when it is, or when nothing is there."""
    from tfgpu_install.env.journal import open_entries
    from tfgpu_install.env.ownership import looks_like_env, problem

    if not os.path.lexists(env):
        return None
    done = [e for e in open_entries(entries) if e.event == "done" and e.step == "env.create"]
    record = obj(done[0].data, "undo") if done else {}
    ident = record.get("identity")
    if isinstance(ident, dict):
        return problem(env, ident)
    return None if looks_like_env(env) else "it is not a venv or conda env directory"


@dataclass(frozen=True)
class Removal:
    """What removing the env means, asked before it goes (commands/envs.py words it)."""

    env: Path
    size: TreeUsage  # its own bytes (freed) and those it shares (kept)
    steps: int  # journaled changes to undo


@dataclass(frozen=True)
class EnvRemoved:
    """`envs remove`'s outcome (undone None: a dry run, nothing changed)."""

    removal: Removal
    dry_run: bool
    undone: Optional[ExecReport] = None
    gone: bool = False  # the directory is not there any more
    was_default: bool = False
    freed: int = 0  # bytes


def remove_env(ctx: Context, req: RemoveRequest, ask: Callable[[Removal], None]) -> EnvRemoved:
    """Remove an env this tool made, through its journal; `ask` is called first and stops it by raising."""
    from tfgpu_install.app.rollback import journal_steps
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.env.disksize import tree_usage
    from tfgpu_install.env.journal import Journal, open_entries
    from tfgpu_install.env.layout import user_path
    from tfgpu_install.env.registry import forget_env, last_env
    from tfgpu_install.env.state import known_envs

    env = Path(os.path.abspath(str(user_path(req.env))))
    known = {os.path.abspath(str(e)) for e in known_envs(ctx)}
    if str(env) not in known:
        raise BadInputError(f"{env} is not an env tfgpu-install made",
                            "`tfgpu-install envs` lists the ones it made; remove any other env yourself")
    journal = Journal.for_env(ctx, env)
    ex = Executor(ctx, env, journal=journal)
    with ex.lock(wait=req.wait):
        entries = journal.entries()
        if not created_by_us(entries):
            raise BadInputError(
                f"tfgpu-install did not create {env} (it installed into an env that was already there), "
                "or it was already removed",
                "to undo what tfgpu-install changed in it: `tfgpu-install rollback --env PATH`",
            )
        why = not_the_env(entries, env)
        if why is not None:
            raise BadInputError(f"{env} is not the env tfgpu-install made there: {why}; nothing was removed",
                                "the env it made is gone; move this directory away yourself if it is not yours",
                                ref="env-replaced")
        size = tree_usage(env)
        removal = Removal(env, size, len(open_entries(entries)))
        if req.dry_run:
            return EnvRemoved(removal, dry_run=True)
        ask(removal)
        report = ex.rollback(journal_steps(ctx, entries))
    gone = not env.exists()
    # what went: its own bytes (every link of them was inside it), less any of them still there
    freed = size.own if gone else max(0, size.own - tree_usage(env).own)
    was_default = False
    if gone:  # the default moves to the newest verified env still there (env/registry.py), or there is none
        last = last_env(ctx)
        was_default = last is not None and os.path.abspath(str(last)) == str(env)
        forget_env(ctx, env)
    return EnvRemoved(removal, False, report, gone, was_default, freed)
