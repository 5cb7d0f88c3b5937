"""`tfgpu-install probe`: what this machine has, each value with the source it came from.

Exit codes: 0 with at least one NVIDIA GPU; NO_GPU (3) without one (the facts are still
printed, with every source tried). Parse only: `--from-nvidia-smi FILE|-`.
"""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_assume_flags, assume_flags
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.facts.model import Facts
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_assume_flags(p)


def _src(value: object, source: object) -> str:
    return "-" if value is None else f"{value}  [{source or '?'}]"


def blocks_for(facts: Facts) -> list[Block]:
    d, h = facts.driver, facts.host
    blocks: list[Block] = [Heading("Machine")]
    files = [t.source for t in facts.sources_tried if t.source.startswith("nvidia-smi file")]
    if files:
        blocks.append(Text("driver and GPUs read from "
                           f"{files[0][len('nvidia-smi file'):].strip(' ()') or 'a saved file'} "
                           "(parse only); host, Pythons and CUDA installs are this machine's", "dim"))
    rows = [
        ("driver", d.version, d.source),
        ("highest CUDA the driver supports", d.max_cuda, d.max_cuda_source),
        ("nvidia-smi's own version", d.tool_version, "nvidia-smi") if d.tool_version else None,
        ("OS", h.os, h.source),
        ("kernel", h.kernel, "uname"),
        ("architecture", h.arch, "uname"),
        ("glibc", h.glibc, h.glibc_source),
        ("WSL2", "yes" if h.wsl else "no", "/proc/version, /usr/lib/wsl/lib"),
        ("container", h.container or "none", "/.dockerenv, /run/.containerenv, /proc/1/cgroup"),
        ("sudo", f"yes (SUDO_USER={h.sudo_user})" if h.sudo else "no", "SUDO_USER"),
        (("CUDA_VISIBLE_DEVICES", facts.cuda_visible_devices, "environment")
         if facts.cuda_visible_devices is not None else None),
    ]
    blocks.append(table("", ("fact", "value", "source"), [r for r in rows if r is not None]))
    if facts.gpus:
        blocks.append(table(
            "GPUs",
            ("#", "name", "compute capability", "memory (MiB)", "source"),
            [(g.index, g.name + (" [MIG]" if g.mig else ""), _src(g.compute_capability, g.cc_source), g.memory_mib,
              g.source) for g in facts.gpus],
        ))
    else:
        blocks.append(Text("no NVIDIA GPU found", "error"))
        blocks.append(Bullets("sources tried", tuple(f"{t.source}: {t.outcome}" for t in facts.sources_tried)))
    if facts.pythons:
        blocks.append(table("Pythons", ("version", "path", "source"),
                            [(p.version, p.path, p.source) for p in facts.pythons]))
    tools = [(k, v) for k, v in vars(facts.tools).items() if v]
    if tools:
        blocks.append(table("Tools", ("tool", "path"), tools))
    if facts.cuda_installs:
        blocks.append(table(
            "CUDA already on this machine",
            ("kind", "name", "version", "path", "source"),
            [(c.kind, c.name, c.version, c.path, c.source) for c in facts.cuda_installs],
        ))
    for severity, style in (("error", "error"), ("warning", "warn"), ("info", "dim")):
        items = tuple(f"{p.field}: {p.reason}" for p in facts.problems if p.severity == severity)
        if items:
            title = {"error": "Problems", "warning": "Warnings", "info": "Notes"}[severity]
            blocks.append(Bullets(title, items, style))
    return blocks


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.probe import probe

    facts = probe(ctx, assume_flags(args))
    code = ExitCode.OK if facts.gpus else ExitCode.NO_GPU
    return Result(data=facts.to_json(), blocks=blocks_for(facts), exit_code=int(code))
