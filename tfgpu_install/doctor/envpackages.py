"""The env's packages as `check` and `pip check` see them, read once per walk: what changed since the
env's known-good snapshot (the drift `tfgpu-install check` reports, packages only), which installed
requirements are broken, and which of those packages a failed `import tensorflow` points at.

Naming a culprit needs evidence on both sides: the package changed (or pip check says a requirement on
it is broken) AND the import's error names its module. Nothing is named on one side alone."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context

PIP_CHECK_TIMEOUT = 120.0
_PIP_LINE = re.compile(  # pip: "tensorflow 2.18.0 has requirement numpy<2.1.0,>=1.26.0, but you have numpy 2.2.1."
    r"^(?P<pkg>[A-Za-z0-9][\w.-]*) (?P<ver>\S+) has requirement "
    r"(?P<req>(?P<dep>[A-Za-z0-9][\w.-]*)[^,\s]*(?:,[^,\s]+)*), but you have (?P=dep) (?P<have>\S+?)\.?$",
    re.MULTILINE | re.IGNORECASE)
_PIP_MISSING = re.compile(  # pip: "tensorflow 2.18.0 requires ml-dtypes, which is not installed."
    r"^(?P<pkg>[A-Za-z0-9][\w.-]*) (?P<ver>\S+) requires (?P<dep>[A-Za-z0-9][\w.-]*), which is not installed\.?$",
    re.MULTILINE | re.IGNORECASE)
_UV_LINE = re.compile(  # uv: "The package `tensorflow` requires `numpy>=1.26.0,<2.1.0`, but `2.2.1` is installed"
    r"The package `(?P<pkg>[^`]+)` requires `(?P<req>(?P<dep>[A-Za-z0-9][\w.-]*)[^`]*)`, but `(?P<have>[^`]+)` "
    r"is installed")
# Where a distribution's import name differs from its name.
_MODULES = {"protobuf": ("google.protobuf", "protobuf"), "ml-dtypes": ("ml_dtypes",), "tf-keras": ("tf_keras",),
            "typing-extensions": ("typing_extensions",), "h5py": ("h5py",)}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Conflict:
    package: str  # the one whose requirement is broken ("tensorflow")
    dependency: str  # what it requires ("numpy")
    requirement: str  # "numpy<2.1.0,>=1.26.0"
    have: str  # the installed version, or "" when missing

    def text(self) -> str:
        have = f"{self.dependency} {self.have} is installed" if self.have else f"{self.dependency} is not installed"
        return f"{self.package} requires {self.requirement}, but {have}"


@dataclass(frozen=True)
class EnvPackages:
    snapshot: Optional[str] = None  # the known-good snapshot compared against; None: there is none
    changed: tuple[str, ...] = ()  # "numpy: 2.0.2 -> 1.26.4"
    added: tuple[str, ...] = ()  # "six==1.16.0"
    removed: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    pip_check: str = "not run"  # "pip check", "uv pip check", or why it did not run

    @property
    def drifted(self) -> bool:
        return bool(self.changed or self.added or self.removed)

    def drift_lines(self) -> tuple[str, ...]:
        return (tuple(f"changed: {c}" for c in self.changed) + tuple(f"added: {a}" for a in self.added)
                + tuple(f"removed: {r}" for r in self.removed))

    def suspects(self) -> dict[str, str]:
        """canonical package name -> what was seen of it (drift line and/or broken requirement)."""
        out: dict[str, str] = {}
        for line in self.drift_lines():
            name = re.split(r"[:=]", line.split(": ", 1)[1], maxsplit=1)[0]
            out[canonical(name)] = f"{line} since the known-good snapshot {self.snapshot}"
        for c in self.conflicts:
            key = canonical(c.dependency)
            out[key] = "; ".join(x for x in (out.get(key), f"{self.pip_check}: {c.text()}") if x)
        return out


def parse_pip_check(text: str) -> tuple[Conflict, ...]:
    """The broken requirements pip check or uv pip check printed (pure)."""
    out = [Conflict(m["pkg"], m["dep"], m["req"], m["have"]) for m in _PIP_LINE.finditer(text)]
    out += [Conflict(m["pkg"], m["dep"], m["dep"], "") for m in _PIP_MISSING.finditer(text)]
    out += [Conflict(m["pkg"], m["dep"], m["req"], m["have"]) for m in _UV_LINE.finditer(text)]
    return tuple(out)


def culprit(packages: EnvPackages, error: str) -> Optional[tuple[str, str]]:
    """(package, what was seen of it) for the changed or conflicting package whose module the import's error
    names; None when no such package is named there (then nothing is blamed)."""
    for key, seen in packages.suspects().items():
        if key in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"):
            continue  # every traceback of `import tensorflow` names it
        modules = _MODULES.get(key, (key.replace("-", "_"),))
        if any(re.search(rf"(?<![\w.]){re.escape(m)}(?![\w])", error, re.IGNORECASE) for m in modules):
            return key, seen
    return None


def read_packages(ctx: Context, env: str, python: Optional[str]) -> EnvPackages:
    """Drift against the env's known-good snapshot (or its export), then pip check (uv's when the env has
    no pip). Both are read-only."""
    snapshot, changed, added, removed = _drift(ctx, env)
    conflicts, how = _pip_check(ctx, python) if python else ((), "not run: the env has no Python")
    return EnvPackages(snapshot, changed, added, removed, conflicts, how)


def _drift(ctx: Context, env: str) -> tuple[Optional[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    from tfgpu_install.errors import BadInputError
    from tfgpu_install.snapshot import model as snap_mod
    from tfgpu_install.snapshot.drift import compare
    from tfgpu_install.snapshot.envstate import installed_packages

    path = Path(os.path.abspath(env))
    try:
        store = snap_mod.scan(ctx.state_dir)
    except BadInputError:
        return None, (), (), ()
    found = (snap_mod.latest_for_env(ctx.state_dir, path, store=store)
             or snap_mod.latest_for_env(ctx.state_dir, path, "export", store=store))
    if found is None:
        return None, (), (), ()
    good = found[1]
    d = compare((good.packages, installed_packages(path)), ((), ()), ({}, {}), None)
    return good.id, d.packages_changed, d.packages_added, d.packages_removed


def _pip_check(ctx: Context, python: str) -> tuple[tuple[Conflict, ...], str]:
    res = ctx.runner.run([python, "-m", "pip", "check"], desc="pip check in the env", timeout=PIP_CHECK_TIMEOUT)
    if "No module named pip" not in res.stderr + res.stdout:
        return _read(res.returncode, res.stdout + res.stderr, "pip check")
    from tfgpu_install.env.tools import find_uv

    uv = find_uv(ctx)
    if uv is None:
        return (), "not run: the env has no pip and no uv was found"
    res = ctx.runner.run([uv, "pip", "check", "--python", python], desc="uv pip check in the env",
                         timeout=PIP_CHECK_TIMEOUT)
    return _read(res.returncode, res.stdout + res.stderr, "uv pip check")


def _read(returncode: int, text: str, how: str) -> tuple[tuple[Conflict, ...], str]:
    conflicts = parse_pip_check(text)
    if returncode != 0 and not conflicts:
        last = (text.strip().splitlines() or [f"exit {returncode}"])[-1][:200]
        return (), f"{how} failed: {last}"
    return conflicts, how
