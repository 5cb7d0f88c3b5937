"""What an install does to an env's packages, with versions: added, changed, removed.

Before (a dry run, the confirmation): what uv says it would do (`uv pip install --dry-run` on an env
that exists, `uv pip compile` for one not made yet: everything is added); after a run: the env's
installed versions before and after, compared. Pure parsers and data; the packages step runs uv.

uv's dry run, on stderr:

    Resolved 2 packages in 290ms
    Would uninstall 1 package
    Would install 2 packages
     + packaging==26.4
     - six==1.16.0
     + six==1.17.0

A name both removed and installed is a change (old -> new); a reinstall of the same version (`~`) is
left out: nothing a user sees moves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional

from tfgpu_install.guard.jsondoc import JSONObject

_LINE = re.compile(r"^\s*([-+~])\s+([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==\s*(\S+)|@\s*(\S+))\s*$")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PackageChanges:
    added: tuple[tuple[str, str], ...] = ()  # (name, version)
    changed: tuple[tuple[str, str, str], ...] = ()  # (name, version now, version after)
    removed: tuple[tuple[str, str], ...] = ()  # (name, version now)
    unknown: Optional[str] = None  # why the changes could not be worked out (then the tuples are empty)
    # what uv has to download (name==version): the rest is in its cache already; None when uv did not say
    uncached: Optional[tuple[str, ...]] = None

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)

    def lines(self) -> list[str]:
        return ([f"+ {n} {v}" for n, v in self.added] + [f"~ {n} {a} -> {b}" for n, a, b in self.changed]
                + [f"- {n} {v}" for n, v in self.removed])

    def rows(self) -> list[tuple[str, str, Optional[str], Optional[str]]]:
        """One row per package: (+ ~ -, name, version now, version after; None: none)."""
        return ([("+", n, None, v) for n, v in self.added] + [("~", n, a, b) for n, a, b in self.changed]
                + [("-", n, v, None) for n, v in self.removed])

    def described(self) -> list[str]:
        """One line per package in words: "protobuf: 5.0.0 -> 4.25.9", "six 1.17.0 (added)"."""
        return ([f"{n} {v} (added)" for n, v in self.added] + [f"{n}: {a} -> {b}" for n, a, b in self.changed]
                + [f"{n} {v} (removed)" for n, v in self.removed])

    def installs(self) -> list[str]:
        """The name==version pins the run installs (added, and changed to), from an index (not `@ URL`)."""
        return [f"{n}=={v}" for n, v in self.added if not v.startswith("@")] + [
            f"{n}=={b}" for n, _, b in self.changed if not b.startswith("@")]

    def summary(self) -> str:
        if self.unknown:
            return f"packages: unknown ({self.unknown})"
        if self.empty:
            return "packages: no change"
        parts = [f"{len(x)} {what}" for x, what in ((self.added, "to add"), (self.changed, "to change"),
                                                  (self.removed, "to remove")) if x]
        return "packages: " + ", ".join(parts)

    def of_installed(self) -> "PackageChanges":
        """Only what moves a package the env has now (changed or removed): what a user may have put there."""
        return PackageChanges(changed=self.changed, removed=self.removed)

    def to_json(self) -> JSONObject:
        return {"added": [f"{n}=={v}" for n, v in self.added],
                "changed": [{"name": n, "from": a, "to": b} for n, a, b in self.changed],
                "removed": [f"{n}=={v}" for n, v in self.removed], "unknown": self.unknown}


_UNCACHED = re.compile(r"\bIdentified uncached distribution: (\S+)")
_DOWNLOADS = re.compile(r"^\s*Would download (\d+) packages?\b", re.M)


def uncached(text: str) -> Optional[tuple[str, ...]]:
    """What `uv pip install --dry-run -v` says it would download: its count ("Would download N packages";
    none said: nothing to download) and, from its debug lines, which; None when the two disagree (another uv
    that words its debug lines otherwise): then which wheels are cached is unknown."""
    named = tuple(dict.fromkeys(_UNCACHED.findall(text)))
    m = _DOWNLOADS.search(text)
    count = int(m.group(1)) if m else 0
    return named if len(named) == count else None


def parse_dry_run(text: str) -> PackageChanges:
    """`uv pip install --dry-run`'s +/- lines (and with -v, what it would download)."""
    plus: dict[str, tuple[str, str]] = {}
    minus: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None or m.group(1) == "~":
            continue
        version = m.group(3) or f"@ {m.group(4)}"
        (plus if m.group(1) == "+" else minus)[_key(m.group(2))] = (m.group(2), version)
    changed = tuple((plus[k][0], minus[k][1], plus[k][1]) for k in sorted(plus.keys() & minus.keys())
                    if plus[k][1] != minus[k][1])
    return PackageChanges(
        added=tuple(plus[k] for k in sorted(plus.keys() - minus.keys())),
        changed=changed,
        removed=tuple(minus[k] for k in sorted(minus.keys() - plus.keys())),
        uncached=uncached(text),
    )


def parse_compiled(text: str) -> PackageChanges:
    """`uv pip compile`'s pinned lines (name==version): a new env gets every one."""
    found: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = _PIN.match(line)
        if m:
            found[_key(m.group(1))] = (m.group(1), m.group(2))
    return PackageChanges(added=tuple(found[k] for k in sorted(found)))


def between(before: Mapping[str, str], after: Mapping[str, str]) -> PackageChanges:
    """What a run did: the env's installed versions (canonical name -> version) before and after it."""
    return PackageChanges(
        added=tuple((n, after[n]) for n in sorted(after.keys() - before.keys())),
        changed=tuple((n, before[n], after[n]) for n in sorted(before.keys() & after.keys()) if before[n] != after[n]),
        removed=tuple((n, before[n]) for n in sorted(before.keys() - after.keys())),
    )
