"""Differences between two snapshots, or a snapshot and the live environment (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from tfgpu_install.snapshot.model import SEEDED, FileRecord, HostContract, Package


@dataclass(frozen=True)
class Drift:
    packages_added: tuple[str, ...] = ()  # "name==version"
    packages_removed: tuple[str, ...] = ()
    packages_changed: tuple[str, ...] = ()  # "name: old -> new"
    files_added: tuple[str, ...] = ()
    files_removed: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()
    activation_changed: tuple[str, ...] = ()  # files whose tfgpu-install block differs or vanished
    host_changed: tuple[str, ...] = ()  # "driver: 535.104.05 -> 550.54.14"

    @property
    def clean(self) -> bool:
        return not any(self.to_json().values())

    def to_json(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.__dict__.items()}

    def lines(self) -> list[str]:
        labels = {
            "packages_added": "package added",
            "packages_removed": "package removed",
            "packages_changed": "package changed",
            "files_added": "library file added",
            "files_removed": "library file removed",
            "files_changed": "library file changed",
            "activation_changed": "activation edited",
            "host_changed": "host changed",
        }
        return [f"{labels[k]}: {item}" for k, items in self.__dict__.items() for item in items]


def _packages(a: Sequence[Package], b: Sequence[Package]) -> tuple[tuple[str, ...], ...]:
    old = {p.key: p for p in a if p.key not in SEEDED}  # an older snapshot may list the seeded pip
    new = {p.key: p for p in b if p.key not in SEEDED}
    added = tuple(new[k].requirement() for k in sorted(new.keys() - old.keys()))
    removed = tuple(old[k].requirement() for k in sorted(old.keys() - new.keys()))
    changed = tuple(
        f"{new[k].name}: {old[k].version} -> {new[k].version}" if old[k].version != new[k].version
        else f"{new[k].name} {new[k].version}: another build (other files than recorded)"
        for k in sorted(old.keys() & new.keys())
        if old[k].version != new[k].version or (old[k].content and new[k].content and old[k].content != new[k].content)
    )
    return added, removed, changed


def _files(a: Sequence[FileRecord], b: Sequence[FileRecord]) -> tuple[tuple[str, ...], ...]:
    old = {f.path: f for f in a}
    new = {f.path: f for f in b}
    return (
        tuple(sorted(new.keys() - old.keys())),
        tuple(sorted(old.keys() - new.keys())),
        tuple(sorted(k for k in old.keys() & new.keys() if old[k].sha256 != new[k].sha256)),
    )


def _host(a: HostContract, b: HostContract) -> tuple[str, ...]:
    out = []
    for name in ("driver", "max_cuda", "glibc", "arch"):
        x, y = getattr(a, name), getattr(b, name)
        if x and y and x != y:
            out.append(f"{name}: {x} -> {y}")
    ga = [(g.get("name"), g.get("compute_capability")) for g in a.gpus]
    gb = [(g.get("name"), g.get("compute_capability")) for g in b.gpus]
    if ga and gb and ga != gb:
        out.append(f"gpus: {', '.join(str(n) for n, _ in ga)} -> {', '.join(str(n) for n, _ in gb)}")
    return tuple(out)


def relative_activation(activation: Mapping[str, str], env_path: object) -> dict[str, str]:
    """What the activation sets, not where its env lives: the env's own absolute path (and its
    shell-quoted forms) becomes `$ENV`, so two envs restored from one snapshot compare equal and
    a library dir is compared relative to its env."""
    path = str(env_path or "").rstrip("/")
    if not path.startswith("/") or len(path) < 2:
        return dict(activation)
    return {k: v.replace(path, "$ENV") for k, v in activation.items()}


def compare(
    packages: tuple[Sequence[Package], Sequence[Package]],
    files: tuple[Sequence[FileRecord], Sequence[FileRecord]],
    activation: tuple[Mapping[str, str], Mapping[str, str]],
    host: Optional[tuple[HostContract, HostContract]] = None,
) -> Drift:
    """Each argument is (before, after)."""
    pa, pr, pc = _packages(*packages)
    fa, fr, fc = _files(*files)
    act_before, act_after = activation
    act = tuple(sorted(k for k in act_before.keys() | act_after.keys() if act_before.get(k) != act_after.get(k)))
    return Drift(pa, pr, pc, fa, fr, fc, act, _host(*host) if host else ())


def to_jsonable(d: Drift) -> dict[str, object]:
    return {"clean": d.clean, **d.to_json()}


__all__ = ["Drift", "compare", "relative_activation", "to_jsonable"]
