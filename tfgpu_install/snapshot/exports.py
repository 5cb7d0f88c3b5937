"""Snapshot exports that other tools read: requirements.txt with hashes, conda's
environment.yml, and PEP 751 pylock.toml (written by uv from the same pins)."""

from __future__ import annotations

from typing import Any

from tfgpu_install.snapshot.model import Snapshot

FORMATS = ("tfgpu", "requirements", "conda", "pylock")


def requirements_txt(snap: Snapshot) -> str:
    """pip's --require-hashes format: every line pinned with == and at least one --hash."""
    from tfgpu_install.snapshot.contract import choice_of

    lines = [
        f"# tfgpu-install snapshot {snap.id}: TensorFlow {choice_of(snap).get('tensorflow', '?')}, "
        f"Python {snap.env.get('python', '?')}",
        "# install with: pip install --require-hashes -r THIS_FILE",
    ]
    missing = [p.requirement() for p in snap.packages if not p.hashes]
    if missing:
        lines.append("# WARNING: no hash known for: " + ", ".join(missing) + " (pip --require-hashes will refuse)")
    for p in snap.packages:
        if p.hashes:
            lines.append(p.requirement() + " \\")
            hashes = [f"    --hash={h}" for h in p.hashes]
            lines.extend(h + " \\" for h in hashes[:-1])
            lines.append(hashes[-1])
        else:
            lines.append(p.requirement())
    return "\n".join(lines) + "\n"


def conda_environment(snap: Snapshot, name: str = "") -> dict[str, Any]:
    """conda's environment.yml: Python from conda, everything else from pip (as pip installed it)."""
    from tfgpu_install.snapshot.contract import choice_of

    c = choice_of(snap)
    py = ".".join(str(snap.env.get("python") or c.get("python") or "3").split(".")[:2])
    env_name = name or (f"tf-{c['tensorflow']}" if c.get("tensorflow") else "tfgpu")
    pip_pins = [p.requirement() for p in snap.packages if p.key not in ("pip", "setuptools", "wheel")]
    return {
        "name": env_name,
        "channels": ["conda-forge"],
        "dependencies": [f"python={py}", "pip", {"pip": pip_pins}],
    }


def conda_environment_yml(snap: Snapshot, name: str = "") -> str:
    import yaml

    return "# tfgpu-install snapshot export; create with: conda env create -f THIS_FILE\n" + yaml.safe_dump(
        conda_environment(snap, name), sort_keys=False
    )
