"""The Ansible collection's copies of the tool's own tables, generated (the collection runs on nodes that
may not have the tool, so it cannot import them): tfgpu_snapshot's `format` choices from
tfgpu_install/snapshot/exports.FORMATS, in its DOCUMENTATION and in its argument spec.

Usage: python3 scripts/collection_choices.py [--check]   (--check: exit 1 when the module is not in step;
tests/fleet/test_fleet_options.py runs the same comparison)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MODULE = REPO / "ansible_collections" / "tfgpu" / "install" / "plugins" / "modules" / "tfgpu_snapshot.py"
_DOC = re.compile(r"(?m)^(  format:\n(?:    .*\n)*?    choices: )\[[^\]\n]*\]$")
_CODE = re.compile(r"(?m)^FORMATS = \[[^\]\n]*\]")


def names() -> list[str]:
    from tfgpu_install.snapshot.exports import FORMATS

    return list(FORMATS)


def render(text: str, formats: list[str]) -> str:
    """The module's text with both copies of the choices set to `formats` (each must be found once)."""
    doc, n_doc = _DOC.subn(lambda m: m.group(1) + "[" + ", ".join(formats) + "]", text)
    out, n_code = _CODE.subn("FORMATS = [" + ", ".join(f'"{f}"' for f in formats) + "]", doc)
    if (n_doc, n_code) != (1, 1):
        raise SystemExit(f"{MODULE}: expected one `format: ... choices:` and one `FORMATS = [...]`, "
                         f"found {n_doc} and {n_code}")
    return out


def main(argv: list[str]) -> int:
    text = MODULE.read_text()
    want = render(text, names())
    if "--check" in argv:
        if want != text:
            print(f"{MODULE} is not in step with snapshot/exports.FORMATS: run scripts/collection_choices.py")
            return 1
        return 0
    if want != text:
        MODULE.write_text(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
