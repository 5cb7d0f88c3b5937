"""Each env's state dir under the tool's state dir (<state>/envs/<key>: journal, lock, verify.json),
and the envs named by those dirs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context


def env_key(env: Path) -> str:
    """A directory name for an env: its basename plus a hash of its absolute path."""
    absolute = os.path.abspath(str(env))
    digest = hashlib.sha256(absolute.encode()).hexdigest()[:12]
    base = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(absolute).name) or "env"
    return f"{base}-{digest}"


def env_state_dir(ctx: Context, env: Path) -> Path:
    return ctx.state_dir / "envs" / env_key(env)


def known_envs(ctx: Context) -> list[Path]:
    """The envs this tool has journaled or verified, the most recently changed first: each
    state dir's verify.json or journal (its "run" lines) names its env."""
    candidates = []
    for d in (ctx.state_dir / "envs").glob("*"):
        for name in ("verify.json", "journal.jsonl"):
            f = d / name
            try:
                candidates.append((f.stat().st_mtime, f))
            except OSError:
                continue
    from tfgpu_install.guard.trust import problem

    found: dict[str, None] = {}
    for _, f in sorted(candidates, reverse=True):
        if problem(f, ctx.state_dir) is not None:
            continue  # written by someone else: names nothing
        env = _env_named_in(f)
        if env:
            found.setdefault(env)
    return [Path(e) for e in found]


def _env_named_in(f: Path) -> Optional[str]:
    try:
        if f.name == "verify.json":
            return str(json.loads(f.read_text()).get("env") or "") or None
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("event") == "run" and entry.get("env"):
                    return str(entry["env"])
    except (OSError, ValueError, AttributeError):
        return None
    return None


def hash_cache(ctx: Context, env: Path) -> Path:
    """Where the file check remembers digests by identity (env/integrity.HashCache)."""
    return env_state_dir(ctx, env) / "file-hashes.json"


def written_list(ctx: Context, env: Path) -> Path:
    """Where an install lists the files it wrote from hash-checked wheels (integrity.written_since)."""
    return env_state_dir(ctx, env) / "installed-files.json"
