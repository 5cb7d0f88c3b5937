"""The fleet commands' options, one row each: the flag (which actions take it, how argparse reads it), the
field of the typed request (FleetRequest) it fills, and the extra var the playbook receives (None: the
option acts on the controller or on ansible-playbook itself). An option is added here and nowhere else:
the parser, the request and the extra vars are built from these rows (tests/fleet/test_fleet_options.py
holds each row's far end). Light on purpose: the parser is built from it at every start."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from tfgpu_install.fleet import serveaddr
from tfgpu_install.guard import argtypes
from tfgpu_install.guard.jsondoc import JSONObject

ALL = ("install", "status", "snapshot", "restore")
PROVISION = ("install", "restore")


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def percent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole percentage from 0 to 100")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and 1 <= value <= 30 * 86400):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 1 to 2592000 (30 days)")
    return value


def file_arg(text: str) -> str:
    """A file the controller reads: not empty (an empty word is a mistake, not the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty file name")
    if "\0" in text or len(text) > 4096:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}... is not a usable file name")
    from tfgpu_install.guard.argtypes import path

    return path(text)  # also a name over NAME_MAX, not UTF-8 (the bad-values sweep: exit 2, not 1)


def _path(value: Any) -> Optional[Path]:
    return Path(value).expanduser().resolve() if value else None


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]  # ("--allow-cpu",); a positional: ("snapshot",)
    attr: str  # the FleetRequest field
    actions: tuple[str, ...]
    help: str
    spec: Mapping[str, Any] = field(default_factory=dict)  # argparse: type/action/metavar/default/required
    convert: Callable[[Any], Any] = lambda v: v  # parsed value -> the request's typed value
    extra_var: Optional[str] = None  # what the playbook receives (None: the controller's own)
    to_var: Callable[[Any], Any] = lambda v: v  # request value -> extra var value
    sample: tuple[str, ...] = ()  # argv words for the test that holds this row's far end


OPTIONS: tuple[Option, ...] = (
    Option(("-i", "--inventory"), "inventory", ALL, "an Ansible inventory",
           {"required": True, "metavar": "INVENTORY", "type": file_arg, "dest": "inventory"},
           convert=lambda v: Path(v).expanduser(), sample=("-i", "hosts.ini")),
    Option(("--limit",), "limit", ALL, "only these hosts (Ansible's --limit)", {"metavar": "PATTERN"},
           sample=("--limit", "node1")),
    Option(("--forks",), "forks", ALL, "hosts worked on at once (Ansible's --forks; default: one per host, up to 64)",
           {"type": count, "metavar": "N"}, sample=("--forks", "3")),
    Option(("--wheel",), "wheel", ALL, "the tfgpu-install wheel to ship (default: this installed tool's own wheel, "
           "built once from its installed files)", {"metavar": "FILE", "type": file_arg}, convert=_path,
           extra_var="tfgpu_wheel", to_var=str, sample=("--wheel", "dist/t.whl")),
    Option(("--index-url",), "index_url", ALL, "the package index the nodes install from (with --serve-index: the "
           "upstream the controller fetches from, once per file)", {"metavar": "URL", "type": argtypes.url},
           extra_var="tfgpu_index_url", sample=("--index-url", "https://pypi.example/simple/")),
    Option(("--serve-index",), "serve_index", ALL, "serve a pull-through package index to the nodes from this "
           "controller, on ADDR (an address of this machine the nodes route to; `auto`: the one its routes to "
           "them use; PORT 0 or none: any free one): each file is fetched upstream once, the URL carries a "
           "token of this run", {"metavar": "ADDR[:PORT]", "type": serveaddr.parse}, sample=("--serve-index", "auto")),
    Option(("--serve-index-any",), "serve_index_any", ALL, "let --serve-index listen on every interface (0.0.0.0 "
           "or ::): refused without this", {"action": "store_true"}, sample=("--serve-index-any",)),
    Option(("--timeout",), "timeout_s", ALL, "bound on the whole run (default: the per-host bound times the waves "
           "of hosts); hosts without a row by then read 'not finished'", {"type": seconds, "metavar": "S"},
           sample=("--timeout", "60")),
    Option(("--host-timeout",), "host_timeout_s", ALL, "bound on one host's tfgpu-install run (default 3600)",
           {"type": seconds, "metavar": "S", "default": 3600.0}, extra_var="tfgpu_timeout", to_var=int,
           sample=("--host-timeout", "90")),
    Option(("--serial",), "serial", PROVISION, "rolling: N hosts per batch (Ansible's serial)",
           {"type": count, "metavar": "N"}, extra_var="tfgpu_serial", sample=("--serial", "2")),
    Option(("--max-fail-percentage",), "max_fail_percentage", PROVISION,
           "stop the run once more than P%% of a batch failed (default 100: never; Ansible still stops when a "
           "whole --serial batch failed)", {"type": percent, "metavar": "P"}, extra_var="tfgpu_max_fail_percentage",
           sample=("--max-fail-percentage", "50")),
    Option(("--check",), "check", PROVISION, "plan only (install --dry-run on every host)", {"action": "store_true"},
           sample=("--check",)),
    Option(("--allow-cpu",), "allow_cpu", PROVISION, "hosts without a usable GPU verify on the CPU",
           {"action": "store_true"}, extra_var="tfgpu_allow_cpu", sample=("--allow-cpu",)),
    Option(("--env",), "env", PROVISION, "the env path on each host", {"metavar": "PATH"}, extra_var="tfgpu_env",
           sample=("--env", "/opt/tf")),
    Option(("--profile",), "profile", ("install",), "profile name or policy file (default: stable)",
           {"default": "stable"}, extra_var="tfgpu_profile", sample=("--profile", "latest")),
    Option(("--snapshot",), "snapshot", ("install",), "restore this snapshot instead of resolving per host",
           {"metavar": "FILE", "type": file_arg}, convert=_path, extra_var="tfgpu_snapshot_file", to_var=str,
           sample=("--snapshot", "s.yaml")),
    Option(("--same",), "same", ("install",), "one combination every host can run (the intersection), not each "
           "host's best", {"action": "store_true"}, sample=("--same",)),
    Option(("--same-by",), "same_by", ("install",), "with --same: one combination per inventory group (each host "
           "in its first group), not one for the whole fleet", {"choices": ("fleet", "group"), "default": "fleet"},
           sample=("--same-by", "group")),
    Option(("--offline",), "offline", PROVISION, "with a snapshot: build one bundle here, ship it, nodes install "
           "from it only", {"action": "store_true"}, sample=("--offline",)),
    Option(("snapshot",), "snapshot", ("restore",), "the snapshot file (on this controller)",
           {"metavar": "FILE", "type": file_arg}, convert=_path, extra_var="tfgpu_snapshot_file", to_var=str,
           sample=("s.yaml",)),
    Option(("-o", "--output"), "fetch_dir", ("snapshot",), "where the host snapshots land",
           {"metavar": "DIR", "type": argtypes.output}, convert=_path, extra_var="tfgpu_fetch_dir", to_var=str,
           sample=("-o", "snaps")),
)


def for_action(action: str) -> list[Option]:
    return [o for o in OPTIONS if action in o.actions]


def add_to(parser: argparse.ArgumentParser, action: str) -> None:
    for o in for_action(action):
        kw = dict(o.spec)
        if not o.flags[0].startswith("-"):
            kw.pop("dest", None)
            parser.add_argument(o.flags[0], help=o.help, **kw)
        else:
            parser.add_argument(*o.flags, help=o.help, **{"dest": o.attr, **kw})


def request_fields(args: argparse.Namespace, action: str) -> dict[str, Any]:
    """FleetRequest's fields from the parsed flags of this action (absent ones keep their default): its
    keyword arguments, each value its row's `convert` made (typed by the row, not by this dict)."""
    out: dict[str, Any] = {}
    for o in for_action(action):
        dest = o.flags[0] if not o.flags[0].startswith("-") else o.attr
        value = getattr(args, dest, None)
        if value is not None:
            out[o.attr] = o.convert(value)
    return out


def extra_vars(request: Any, action: str) -> JSONObject:
    """The extra vars of the rows that have one, for the values the request holds (None and False: left out,
    the role's default stands; a flag given as false is the default)."""
    out: JSONObject = {}
    for o in for_action(action):
        value = getattr(request, o.attr, None)
        if o.extra_var and value is not None and value != "":
            out[o.extra_var] = o.to_var(value)
    return out
