"""Which hosts an inventory (with --limit) names, asked of `ansible-inventory --list` so every
inventory format and plugin Ansible knows works the same. Parsing is pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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


_IMPLICIT = ("all", "ungrouped")


def groups_of(doc: Mapping[str, Any], hosts: list[str]) -> dict[str, str]:
    """host -> its first named group in inventory order (a depth-first walk from `all`; the innermost
    group that lists it); "ungrouped" for a host in none."""
    out: dict[str, str] = {}

    def walk(group: str, seen: set[str]) -> None:
        if group in seen:
            return
        seen.add(group)
        node = _mapping(doc.get(group))
        for child in node.get("children") or ():
            walk(child, seen)
        for host in node.get("hosts") or ():
            if group not in _IMPLICIT:
                out.setdefault(host, group)

    walk("all", set())
    return {h: out.get(h, "ungrouped") for h in hosts}


def addresses_of(doc: Mapping[str, Any], hosts: list[str]) -> dict[str, str]:
    """host -> the address Ansible connects to (ansible_host, else the inventory name)."""
    hostvars = _mapping(_mapping(doc.get("_meta")).get("hostvars"))
    out = {}
    for h in hosts:
        addr = _mapping(hostvars.get(h)).get("ansible_host")
        out[h] = addr if isinstance(addr, str) and addr else h
    return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Inventory:
    hosts: list[str]
    groups: dict[str, str] = field(default_factory=dict)  # host -> its group (for --same per group)
    addresses: dict[str, str] = field(default_factory=dict)  # host -> ansible_host


def list_hosts(runner: Runner, tool: str, inventory: Path, limit: Optional[str], env: Mapping[str, str]) -> list[str]:
    return read_inventory(runner, tool, inventory, limit, env).hosts


def read_inventory(runner: Runner, tool: str, inventory: Path, limit: Optional[str],
                   env: Mapping[str, str]) -> Inventory:
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
    doc = doc if isinstance(doc, dict) else {}
    hosts = hosts_in(doc)
    if not hosts:
        raise BadInputError(f"no hosts in {inventory}" + (f" matching --limit {limit}" if limit else ""),
                            hint="list hosts in the inventory, or widen --limit")
    return Inventory(hosts, groups_of(doc, hosts), addresses_of(doc, hosts))
