"""`envs`: the envs this tool made, each with what is in it now (TensorFlow, cuDNN and Python read
from the env itself), what was recorded (CUDA), its last verification, its drift from its
known-good snapshot (packages), its size on disk, whether a run on it stopped before it was
verified (incomplete), and which one is the default (env/registry.py's one rule, as every
command without --env uses it). `envs default PATH` makes another env the default."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.resolver.model import Choice

if TYPE_CHECKING:
    from tfgpu_install.snapshot.document import Snapshot

_TF_NAMES = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-gpu")


@dataclass(frozen=True)
class EnvRow:
    path: str
    exists: bool
    default: bool
    tensorflow: Optional[str]
    cuda: Optional[str]
    cudnn: Optional[str]
    python: Optional[str]
    verified: Optional[str]  # when the last verification ran
    verified_ok: Optional[bool]
    drift: str  # "clean", "N package(s) differ", or "unknown (...)"
    drift_lines: tuple[str, ...]
    size_bytes: int  # own + shared: the env's files on disk, each once (order-independent)
    sources: dict[str, str] = field(default_factory=dict)  # value -> where it was read
    incomplete: bool = False  # a run stopped before the env was verified: run it again to resume
    own_bytes: int = 0  # linked only from inside the env: what removing it frees
    shared_bytes: int = 0  # also linked from outside it (uv's cache, another env): stays when it goes

    def to_json(self) -> JSONObject:
        d = asdict(self)
        d["drift_lines"] = list(self.drift_lines)
        return d


def _installed(env: Path) -> dict[str, str]:
    from tfgpu_install.snapshot.envstate import installed_packages

    return {p.key: p.version for p in installed_packages(env)}


def _recorded(ctx: Context, env: Path) -> tuple[Optional["Snapshot"], Optional[Choice]]:
    """The env's latest known-good snapshot and its combination (or the journaled plan's)."""
    from tfgpu_install.errors import TfgpuError
    from tfgpu_install.snapshot.contract import choice_of
    from tfgpu_install.snapshot.model import latest_for_env

    found = latest_for_env(ctx.state_dir, env)
    if found is not None:
        return found[1], choice_of(found[1])
    try:
        from tfgpu_install.plan.journaled import recorded_plan

        plan = recorded_plan(ctx, env)
    except (TfgpuError, OSError, ValueError):
        return None, None
    return None, plan.choice


def _verification(ctx: Context, env: Path) -> tuple[Optional[str], Optional[bool]]:
    from tfgpu_install.env.verification import BadRecord, read_record

    try:
        doc = read_record(ctx, env)
    except BadRecord:  # damaged: vouches for nothing (`verify` says what is wrong with it)
        return "unreadable record", None
    report = doc.report if doc else None
    if report is None or not report.raw:
        return None, None
    return str(report.when or "?"), bool(report.ok)


def env_row(ctx: Context, env: Path, default: Optional[Path]) -> EnvRow:
    from tfgpu_install.env.disksize import TreeUsage, tree_usage
    from tfgpu_install.env.registry import incomplete
    from tfgpu_install.snapshot.drift import compare
    from tfgpu_install.snapshot.envstate import env_python_version, installed_packages

    exists = env.is_dir()
    snap, choice = _recorded(ctx, env)
    live = _installed(env) if exists else {}
    sources: dict[str, str] = {}
    tf = next((live[n] for n in _TF_NAMES if n in live), None)
    if tf:
        sources["tensorflow"] = "installed"
    cudnn = next((v for k, v in sorted(live.items()) if k.startswith("nvidia-cudnn-cu")), None)
    if cudnn:
        sources["cudnn"] = "installed"
    elif choice is not None and choice.cudnn:
        cudnn, sources["cudnn"] = choice.cudnn, "recorded"
    cuda = choice.cuda if choice is not None and choice.cuda else None
    if cuda:
        sources["cuda"] = "recorded"
    python = env_python_version(env) if exists else None
    if python:
        sources["python"] = "installed"
    when, ok = _verification(ctx, env)
    lines: tuple[str, ...]
    if not exists:
        drift, lines = "unknown (the env is gone)", ()
    elif snap is None:
        drift, lines = "unknown (no known-good snapshot)", ()
    else:
        d = compare((snap.packages, installed_packages(env)), ((), ()), ({}, {}))
        lines = tuple(d.lines())
        drift = "clean" if not lines else f"{len(lines)} package(s) differ"
        sources["drift"] = f"packages vs snapshot {snap.id}"
    same_default = default is not None and os.path.abspath(str(default)) == os.path.abspath(str(env))
    size = tree_usage(env) if exists else TreeUsage(0, 0)
    return EnvRow(
        path=str(env), exists=exists, default=same_default, tensorflow=tf, cuda=cuda, cudnn=cudnn, python=python,
        verified=when, verified_ok=ok, drift=drift, drift_lines=lines,
        size_bytes=size.total, sources=sources, incomplete=incomplete(ctx, env), own_bytes=size.own,
        shared_bytes=size.shared,
    )


def env_rows(ctx: Context, include_missing: bool = False) -> list[EnvRow]:
    """Every env this tool knows that exists (or, not yet created, has an interrupted run), the
    gone ones too with include_missing; the default marked by the rule every command uses."""
    from tfgpu_install.env.registry import default_env
    from tfgpu_install.env.state import known_envs

    default = default_env(ctx)
    rows = [env_row(ctx, env, default) for env in known_envs(ctx)]
    return [r for r in rows if r.exists or r.incomplete or include_missing]


@dataclass(frozen=True)
class EnvList:
    """`envs`: the rows, and the bytes on disk of every env together (each file once)."""

    rows: tuple[EnvRow, ...]
    total_bytes: int


def list_envs(ctx: Context, include_missing: bool = False) -> EnvList:
    from tfgpu_install.env.disksize import disk_usage

    rows = env_rows(ctx, include_missing)
    seen: set[tuple[int, int]] = set()  # every env together, each file once
    return EnvList(tuple(rows), sum(disk_usage(Path(r.path), seen) for r in rows if r.exists))


@dataclass(frozen=True)
class DefaultSet:
    """`envs default PATH`: the env now the default, the one before, whether its last verification passed."""

    env: Path
    previous: Optional[Path]
    verified_ok: bool


def set_default(ctx: Context, given: str) -> DefaultSet:
    """`envs default PATH`: one of this tool's live envs becomes the default (what every command
    without --env means). An env that is not ours, gone or rolled back is refused (exit 5)."""
    from tfgpu_install.env.layout import user_path
    from tfgpu_install.env.registry import default_env, live_envs, remember_env, verified_ok
    from tfgpu_install.errors import BadInputError

    env = Path(os.path.abspath(str(user_path(given))))
    if not any(os.path.abspath(str(e)) == str(env) for e in live_envs(ctx)):
        raise BadInputError(f"{env} is not an env tfgpu-install made that is still there",
                            "`tfgpu-install envs` lists them", ref="env-not-ours")
    before = default_env(ctx)
    remember_env(ctx, env)
    return DefaultSet(env, before, verified_ok(ctx, env))
