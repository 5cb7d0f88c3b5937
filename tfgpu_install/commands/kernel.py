"""`tfgpu-install kernel install|remove [--env E] [--name N] [--sys-prefix]` (app/kernel.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.errors import UsageError
from tfgpu_install.report import Bullets, Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.kernel import Registered, Removed


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="kernel_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    ins = sub.add_parser("install", help="register the env as a Jupyter kernel (needs ipykernel in the env)")
    rem = sub.add_parser("remove", help="remove the kernels this tool registered for the env")
    for sp in (ins, rem):
        add_env_flag(sp)
        sp.add_argument("--name", metavar="NAME", type=non_empty, help="kernel name (default: tfgpu-<env dir name>)")
        sp.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
        sp.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    ins.add_argument("--sys-prefix", action="store_true",
                     help="into the env's share/jupyter/kernels (seen by a Jupyter run from the env) instead of "
                     "the user's Jupyter data dir")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app import kernel

    req = kernel.KernelRequest(env=args.env, name=args.name, sys_prefix=getattr(args, "sys_prefix", False))
    if args.kernel_command == "install":
        return registered(kernel.install(ctx, req))
    if args.kernel_command == "remove":
        return removed(kernel.remove(ctx, req))
    raise UsageError("kernel needs an action", "install or remove")


def registered(done: "Registered") -> Result:
    data = {"env": str(done.env), "name": done.name, "path": str(done.path), "changed": done.changed,
            "argv": list(done.argv)}
    how = "registered" if done.changed else "already registered"
    return Result(data, [Text(f"kernel {done.name!r} {how} at {done.path}: it starts through "
                              f"{done.env}/bin/tfgpu-run, so the notebook sees the env's CUDA libraries", "ok")])


def removed(done: "Removed") -> Result:
    data = {"env": str(done.env), "removed": [str(p) for p in done.removed]}
    if not done.removed:
        return Result(data, [Text(f"no kernel of {done.env}" + (f" named {done.name!r}" if done.name else "")
                                  + " was registered: nothing to do", "ok")])
    return Result(data, [Bullets("removed", tuple(str(p) for p in done.removed), "ok")])
