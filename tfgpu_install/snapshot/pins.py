"""The one rule for text a snapshot puts into a generated file (requirements.txt of an export or a
bundle, environment.yml, the requirements uv locks): files are built from parsed values, never by
pasting a field's text. A pin is `name==version` from a name and a version that are plain
(guard/names.py: a PEP 503 name, a PEP 440 version) with `--hash=sha256:<64 hex>` options; any
other package is refused (BAD_INPUT), never written. A field shown in a comment is a plain
version or "unknown". (A newline in `env.python` once added `evilpkg @ http://...` to a bundle's
requirements.txt, which pip then fetched.)"""

from __future__ import annotations

from typing import Any, Optional

from tfgpu_install.errors import BadInputError
from tfgpu_install.guard.names import is_project, is_sha256, is_version, printable


def _refused(what: str, value: str) -> BadInputError:
    return BadInputError(f"the snapshot's {what} {printable(value[:80])!r} is not a plain one: not written to a file",
                         "export the snapshot again from the env (`tfgpu-install snapshot export`)",
                         ref="bad-snapshot")


def pin(package: Any) -> str:
    """`name==version` of a snapshot Package (name, version), each checked."""
    name, version = str(package.name), str(package.version)
    if not is_project(name):
        raise _refused("package name", name)
    if not is_version(version):
        raise _refused(f"version of {name}", version)
    return f"{name}=={version}"


def hashes(package: Any) -> list[str]:
    """The package's `sha256:<hex>` hashes, each checked."""
    out = []
    for h in package.hashes:
        if not is_sha256(str(h)):
            raise _refused(f"hash of {package.name}", str(h))
        out.append(str(h))
    return out


def shown_version(value: Optional[object]) -> str:
    """A version for a comment line: the value when it is a plain version, else "unknown"."""
    text = "" if value is None else str(value)
    return text if is_version(text) else "unknown"
