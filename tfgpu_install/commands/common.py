"""Flags shared by several commands (plan, install, snapshot restore)."""

from __future__ import annotations

import argparse

from tfgpu_install.facts.model import AssumeFlags
from tfgpu_install.guard import argtypes


def non_empty(value: str) -> str:
    """A path argument: an empty one ("") is a usage error, never "the default"; so is one that
    cannot be a path here (a NUL, not UTF-8, too long: guard/argtypes.py)."""
    return argtypes.path(value)


def add_profile_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        default="stable", type=argtypes.path,
        help="stable (default), latest, legacy, or a path to a profile YAML file",
    )


def add_assume_flags(p: argparse.ArgumentParser) -> None:
    """What-if flags: plan for another machine. They beat detection and say so (source: override)."""
    g = p.add_argument_group("what-if (plan for another machine)")
    g.add_argument("--assume-driver", metavar="VER", help="driver version, e.g. 535.104.05")
    g.add_argument(
        "--assume-gpu",
        metavar="NAME_OR_CC",
        action="append",
        default=None,
        help="a GPU model name or compute capability (repeat, one per GPU)",
    )
    g.add_argument("--assume-python", metavar="X.Y", help="a Python version available on the target")
    g.add_argument("--assume-glibc", metavar="X.Y", help="glibc version of the target")
    g.add_argument(
        "--from-nvidia-smi",
        metavar="FILE", type=non_empty,
        help="a saved nvidia-smi output ('-' for stdin): driver and GPUs come from it",
    )


def add_env_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", metavar="PATH", type=non_empty,
                   help="the target environment (default: the last one installed)")


def assume_flags(args: argparse.Namespace) -> AssumeFlags:
    """The what-if flags of a parsed command line, as the typed request the core takes."""
    return AssumeFlags(
        driver=getattr(args, "assume_driver", None),
        gpus=tuple(getattr(args, "assume_gpu", None) or ()),
        python=getattr(args, "assume_python", None),
        glibc=getattr(args, "assume_glibc", None),
        nvidia_smi=getattr(args, "from_nvidia_smi", None),
    )
