"""Which hosts an inventory (with --limit) names, asked of `ansible-inventory --list` so every
inventory format and plugin Ansible knows works the same. Parsing is pure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

from tfgpu_install.errors import BadInputError, EnvironmentProblem
from tfgpu_install.runner import Runner

INVENTORY_TIMEOUT_S = 120


def hosts_in(doc: Mapping[str, Any]) -> list[str]:
    """Every host under `all` (groups nested through `children`), in inventory order, once each."""
    out: list[str] = []

    def walk(group: str, seen: set[str]) -> None:
        if group in seen:
            return
        seen.add(group)
        node = doc.get(group) or {}
        for host in node.get("hosts") or ():
            if host not in out:
                out.append(host)
        for child in node.get("children") or ():
            walk(child, seen)

    walk("all", set())
    return out


def list_hosts(runner: Runner, tool: str, inventory: Path, limit: Optional[str], env: Mapping[str, str]) -> list[str]:
    if not inventory.exists():
        raise BadInputError(f"inventory {inventory} does not exist",
                            hint="give an Ansible inventory file (INI or YAML) with -i")
    argv = [tool, "-i", str(inventory), "--list"] + (["--limit", limit] if limit else [])
    done = runner.run(argv, desc="ansible-inventory --list", env=env, timeout=INVENTORY_TIMEOUT_S)
    if not done.ok:
        raise BadInputError(f"ansible-inventory could not read {inventory}: {done.stderr.strip()[-600:]}",
                            hint="check the inventory's syntax with `ansible-inventory -i FILE --list`")
    try:
        doc = json.loads(done.stdout)
    except ValueError as exc:
        raise EnvironmentProblem(f"ansible-inventory printed no JSON: {exc}",
                                 hint="check the ansible-core install (`pip install .[fleet]`)") from exc
    hosts = hosts_in(doc if isinstance(doc, dict) else {})
    if not hosts:
        raise BadInputError(f"no hosts in {inventory}" + (f" matching --limit {limit}" if limit else ""),
                            hint="list hosts in the inventory, or widen --limit")
    return hosts
