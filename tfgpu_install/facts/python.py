"""Python interpreters on the machine (PATH, pyenv, conda envs) and the env tools present.

Each interpreter is run once for its exact version (cheap, with a timeout), unless its
path already says it unambiguously (pyenv's versions/3.11.7). What a binary answered is
remembered in the cache dir, keyed by the file itself (`asked_version`).
"""

from __future__ import annotations

import json
import os
import re
import threading
from functools import partial
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import RunnerError, TfgpuError
from tfgpu_install.facts.background import Background
from tfgpu_install.facts.model import Problem, PythonInterp, Tools
from tfgpu_install.files import atomic_write

VERSION_SCRIPT = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
TIMEOUT_S = 5.0
_RE_EXACT = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_RE_PY_NAME = re.compile(r"^python3(?:\.\d+)?$")


def parse_python_version(text: str) -> Optional[str]:
    """"3.11.7" from the child's output (or `python -V`'s "Python 3.11.7"). Never raises."""
    m = re.search(r"(?<![\d.])(\d+\.\d+\.\d+)", text or "")
    return m.group(1) if m else None


def parse_conda_env_list(text: str) -> tuple[str, ...]:
    """Env prefixes from `conda env list --json` ({"envs": [...]})."""
    try:
        doc = json.loads(text)
    except ValueError:
        return ()
    envs = doc.get("envs") if isinstance(doc, dict) else None
    return tuple(e for e in envs if isinstance(e, str)) if isinstance(envs, list) else ()


def version_from_path(path: str) -> Optional[str]:
    """A pyenv install path names its exact version: ~/.pyenv/versions/3.11.7/bin/python."""
    parts = Path(path).parts
    if len(parts) >= 3 and parts[-2] == "bin" and _RE_EXACT.match(parts[-3]):
        return parts[-3]
    return None


def _run_version(ctx: Context, path: str, timeout: float = TIMEOUT_S) -> Optional[str]:
    try:
        done = ctx.runner.run([path, "-c", VERSION_SCRIPT], desc=f"version of {path}", timeout=timeout)
    except RunnerError:  # not executable: unknown, not fatal
        return None
    return parse_python_version(done.stdout) if done.ok else None


_ASKED_LOCK = threading.Lock()
ASKED_FILE = "interpreters.json"


def _binary_key(path: str) -> Optional[str]:
    """Identity of the interpreter binary `path` runs, or None when the answer could change
    without the file changing: a script (a pyenv shim or a wrapper answers for whatever its
    environment selects) or anything unreadable."""
    try:
        real = os.path.realpath(path)
        with open(real, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
            st = os.fstat(f.fileno())
    except OSError:
        return None
    return f"{real}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"


def asked_version(ctx: Context, path: str, timeout: float = TIMEOUT_S) -> Optional[str]:
    """X.Y.Z as the interpreter itself says, run once per binary: the answer is kept in the
    cache dir under the file's identity (path, inode, size, times), so a rebuilt or replaced
    interpreter is asked again. Saves a child process in every probe and env creation."""
    key = _binary_key(path)
    store = ctx.cache_dir / ASKED_FILE
    if key is not None:
        with _ASKED_LOCK:
            known = _read_asked(store)
        if _RE_EXACT.match(str(known.get(key, ""))):
            return str(known[key])
    version = _run_version(ctx, path, timeout)
    if key is not None and version is not None:
        with _ASKED_LOCK:
            known = _read_asked(store)
            known[key] = version
            try:
                atomic_write(store, json.dumps(dict(list(known.items())[-64:]), indent=0))
            except (OSError, TfgpuError):
                pass  # a cache (full disk, read-only dir): asked again next time
    return version


def _read_asked(store: Path) -> dict[str, str]:
    try:
        doc = json.loads(store.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(doc, dict) else {}


def _path_candidates(ctx: Context) -> list[str]:
    out: list[str] = []
    for d in (ctx.environ.get("PATH") or "").split(os.pathsep):
        # pyenv shims are bash wrappers that resolve to pyenv versions (listed below); running
        # them is slow and they answer for whichever version is selected here.
        if not d or "/.pyenv/shims" in d or d.endswith("pyenv/shims"):
            continue
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if _RE_PY_NAME.match(name):
                p = os.path.join(d, name)
                if os.access(p, os.X_OK) and not os.path.isdir(p):
                    out.append(p)
    return out


def _pyenv_candidates(ctx: Context) -> list[str]:
    root = Path(ctx.environ.get("PYENV_ROOT") or (ctx.home / ".pyenv"))
    try:
        versions = sorted((root / "versions").iterdir())
    except OSError:
        return []
    out = []
    for v in versions:
        for name in ("python3", "python"):
            p = v / "bin" / name
            if p.exists():
                out.append(str(p))
                break
    return out


def gather_tools(ctx: Context) -> Tools:
    w = ctx.runner.which
    return Tools(
        conda=w("conda"),
        mamba=w("mamba"),
        micromamba=w("micromamba"),
        uv=w("uv"),
        nvcc=w("nvcc"),
        nvidia_smi=w("nvidia-smi"),
    )


def gather_pythons(ctx: Context, tools: Tools) -> tuple[tuple[PythonInterp, ...], list[Problem]]:
    problems: list[Problem] = []
    found: list[PythonInterp] = []
    seen: set[str] = set()

    def add_all(candidates: list[tuple[str, str]]) -> None:
        """Each new interpreter's version, the ones its path does not name asked all at once."""
        fresh = []
        for path, source in candidates:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                fresh.append((path, source))
        asked = {path: Background(partial(asked_version, ctx, path))
                 for path, _ in fresh if version_from_path(path) is None}
        for path, source in fresh:
            version = version_from_path(path) or asked[path].result()
            if version is None:
                problems.append(Problem("pythons", f"{path}: could not read its version"))
                continue
            found.append(PythonInterp(path=path, version=version, source=source))

    add_all([(p, "PATH") for p in _path_candidates(ctx)] + [(p, "pyenv") for p in _pyenv_candidates(ctx)])
    conda = tools.conda or tools.mamba or tools.micromamba
    if conda:
        argv = [conda, "env", "list", "--json"]
        try:
            done = ctx.runner.run(argv, desc="conda environments", timeout=15)
            envs = parse_conda_env_list(done.stdout) if done.ok else ()
        except RunnerError as exc:
            envs = ()
            problems.append(Problem("pythons", f"`{' '.join(argv)}` failed: {exc}"))
        add_all([(str(Path(prefix) / "bin" / "python"), f"conda:{Path(prefix).name}")
                 for prefix in envs if (Path(prefix) / "bin" / "python").exists()])
    # Newest first within each origin (PATH first: that is what a bare `python3` runs).
    order = {"PATH": 0, "pyenv": 1}
    found.sort(key=lambda p: (order.get(p.source, 2), tuple(-int(x) for x in p.version.split(".") if x.isdigit())))
    if not found:
        problems.append(Problem("pythons", "no Python 3 interpreter found on PATH, in pyenv or in conda", "warning"))
    return tuple(found), problems
