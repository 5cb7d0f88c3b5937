"""`tfgpu-install plan`: the combination this machine can run, why, and the steps an install would run.

Probe -> resolve -> build steps (described, never run). Exit 0 with a choice; 4
(UNSATISFIABLE) when nothing fits, with remedies; 3 (NO_GPU) when there is no usable
GPU and no --allow-cpu. Heavy modules are imported inside run() so start-up stays fast.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tfgpu_install.commands.common import add_assume_flags, add_profile_flag, assume_flags
from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.facts.model import Facts
    from tfgpu_install.resolver.model import Resolution


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_profile_flag(p)
    add_resolve_flags(p)
    add_assume_flags(p)


def tensorflow_version(value: str) -> str:
    """--tensorflow: X.Y or X.Y.Z, digits only (the resolver matches it against the knowledge tables)."""
    import re

    if not re.fullmatch(r"\d{1,3}\.\d{1,3}(\.\d{1,3})?", value):
        raise argparse.ArgumentTypeError(f"expected X.Y or X.Y.Z (e.g. 2.17 or 2.17.1), not {value!r}")
    return value


def add_resolve_flags(p: argparse.ArgumentParser) -> None:
    """Flags that change what the resolver may accept (install should offer the same ones)."""
    p.add_argument(
        "--tensorflow",
        metavar="X.Y[.Z]", type=tensorflow_version, default=None,
        help="this TensorFlow release line (its newest patch the machine runs) or release, instead of the "
        "profile's range; the profile's other rules still apply",
    )
    p.add_argument(
        "--allow-cpu",
        action="store_true",
        help="no usable GPU: resolve for CPU verification instead of stopping (exit 3)",
    )
    p.add_argument(
        "--allow-minor-compat",
        action="store_true",
        help="accept a release this driver runs only through CUDA minor-version compatibility (no PTX JIT)",
    )
    p.add_argument(
        "--restrict-gpus",
        action="store_true",
        help="mixed GPUs: accept a newer release that runs on some of them, and set CUDA_VISIBLE_DEVICES",
    )
    p.add_argument(
        "--strict-driver",
        action="store_true",
        help="keep the newest release the driver supports outright, even when it has only PTX for a GPU and "
        "a newer one with native kernels runs through CUDA minor-version compatibility",
    )


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.plan import plan
    from tfgpu_install.app.resolution import ResolveRequest

    found = plan(ctx, ResolveRequest(
        profile=args.profile, assume=assume_flags(args), allow_cpu=args.allow_cpu,
        allow_minor_compat=args.allow_minor_compat, restrict_gpus=args.restrict_gpus,
        strict_driver=args.strict_driver, tensorflow=args.tensorflow,
    ))
    resolution = found.resolution
    data: dict[str, Any] = resolution.to_json()
    data["steps"] = [step.to_json() for step in found.steps]
    data["machine"] = _machine_summary(found.facts)
    if found.env is not None:
        data["env"] = str(found.env)
    elif found.no_gpu:
        data["no_gpu"] = True
    return Result(data=data, blocks=_blocks(resolution, data), exit_code=found.exit_code)


def _machine_summary(facts: "Facts") -> JSONObject:
    d = facts.driver
    return {
        "driver": d.version,
        "max_cuda": d.max_cuda,
        "driver_source": d.source,
        "gpus": [
            {"index": g.index, "name": g.name, "compute_capability": g.compute_capability, "source": g.source}
            for g in facts.gpus
        ],
        "glibc": facts.host.glibc,
        "os": facts.host.os,
        "pythons": [p.version for p in facts.pythons],
        "python_assumed": any(p.source.startswith("override") for p in facts.pythons),
        "problems": [f"{p.field}: {p.reason}" for p in facts.problems if p.severity != "info"],
    }


def _rejected_rows(res: "Resolution") -> list[tuple[str, str]]:
    """One row per run of consecutive candidates rejected for the same short reasons."""
    rows: list[tuple[str, str]] = []
    runs: list[tuple[list[str], str]] = []
    for r in res.rejected:
        why = r.summary or "; ".join(r.reasons)
        if runs and runs[-1][1] == why:
            runs[-1][0].append(r.tensorflow)
        else:
            runs.append(([r.tensorflow], why))
    for versions, why in runs:
        label = versions[0] if len(versions) == 1 else f"{versions[0]} .. {versions[-1]} ({len(versions)})"
        rows.append((label, why))
    return rows


def _blocks(res: "Resolution", data: dict[str, Any]) -> list[Block]:
    m = data["machine"]
    gpus = ", ".join(f"{g['name']} (cc {g['compute_capability'] or '?'})" for g in m["gpus"]) or "none"
    driver = f"{m['driver']} (CUDA <= {m['max_cuda'] or '?'})" if m["driver"] else "none"
    blocks: list[Block] = [
        Heading(f"Plan (profile {data['profile']})"),
        Text(f"machine: driver {driver}; GPUs: {gpus}; glibc {m['glibc'] or '?'}", "dim"),
    ]
    if m["problems"] and (res.choice is None or any(p.startswith(("driver", "gpus")) for p in m["problems"])):
        blocks.append(Bullets("Probe notes", tuple(m["problems"]), "dim"))
    c = res.choice
    if c is not None:
        where = c.python_path or ("assumed" if m["python_assumed"] else "provided by conda")
        cuda = f"CUDA {c.cuda} ({c.cuda_from})" if c.cuda else "no CUDA"
        line = f"TensorFlow {c.tensorflow}  ·  {cuda}  ·  cuDNN {c.cudnn or '-'}  ·  Python {c.python} ({where})"
        blocks.append(Text(line, "ok"))
        if res.cpu_only:
            blocks.append(Text("CPU only: no usable GPU here; the install will verify on the CPU", "warn"))
        if c.jit_only:
            blocks.append(Text("JIT only: some GPU runs PTX only; the first run compiles kernels for minutes", "warn"))
        if c.visible_devices:
            blocks.append(Text(f"restricted to CUDA_VISIBLE_DEVICES={c.visible_devices}", "warn"))
        blocks.append(Bullets("Why it fits", res.reasons))
    else:
        if data.get("no_gpu"):
            blocks.append(Text("No usable NVIDIA GPU here: nothing to plan a GPU install for.", "error"))
        else:
            blocks.append(Text("No TensorFlow combination fits this machine with this profile.", "error"))
        blocks.append(Bullets("Why", res.reasons))
    if res.warnings:
        blocks.append(Bullets("Warnings", res.warnings, "warn"))
    if res.rejected:
        title = "Rejected newer candidates" if c is not None else "Rejected candidates"
        blocks.append(table(title, ("TensorFlow", "why not (details: --json)"), _rejected_rows(res)))
    if res.options:
        blocks.append(Bullets("Options (offered, not applied)", res.options))
    if res.remedies:
        blocks.append(Bullets("Remedies", res.remedies, "warn"))
    if c is not None:
        if data["steps"]:
            rows = [(str(i), s["id"], s["describe"]) for i, s in enumerate(data["steps"], 1)]
            blocks.append(table(f"Steps an install would run (into {data['env']})", ("#", "step", "what"), rows))
        else:
            blocks.append(Text(f"install target: {data['env']}", "dim"))
    return blocks
