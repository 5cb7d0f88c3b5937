"""`tfgpu-install [install] --profile stable`: the arguments, turned into an InstallRequest
(tfgpu_install/app/install.py does the work)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_assume_flags, add_profile_flag, assume_flags, non_empty
from tfgpu_install.context import Context
from tfgpu_install.guard import argtypes
from tfgpu_install.guard.envpath import env_path_arg
from tfgpu_install.report import Result

if TYPE_CHECKING:
    from tfgpu_install.app.install import InstallRequest


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tfgpu_install.commands.plan import add_resolve_flags

    add_profile_flag(p)
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--dry-run", action="store_true", help="show the plan and each step's state; change nothing")
    g = p.add_argument_group("target environment")
    g.add_argument("--env", metavar="PATH", type=env_path_arg,
                   help="the env to create/update (default: under the user data dir, "
                   "named after the combination, e.g. tf2.17.1-cu12.3-py3.11)")
    g.add_argument("--backend", choices=("venv", "conda"), default=None,
                   help="venv (default when a suitable Python is here) or conda (conda/mamba/micromamba)")
    g.add_argument("--name", metavar="NAME", type=argtypes.env_name, help="a named conda env (with --backend conda)")
    g.add_argument("--python", metavar="X.Y|PATH", type=non_empty,
                   help="the Python for the env: a version or an interpreter path")
    g.add_argument("--index-url", metavar="URL", type=argtypes.url,
                   help="package index (default: PIP_INDEX_URL / UV_INDEX_URL / PyPI)")
    g.add_argument("--seed-pip", dest="seed_pip", action="store_true", default=True,
                   help="give the venv its own pip (the default; offline, from the interpreter's bundled wheel)")
    g.add_argument("--no-pip", dest="seed_pip", action="store_false",
                   help="no pip in the venv (add packages with `uv pip install --python ENV/bin/python`)")
    g.add_argument("--wait", action="store_true", help="if another run holds this env, wait for it instead of failing")
    s = p.add_argument_group("system integration")
    s.add_argument("--system-ldconfig", action="store_true",
                   help="register the env's CUDA libraries in /etc/ld.so.conf.d and run ldconfig (root only)")
    s.add_argument("--shell-rc", metavar="FILE", type=non_empty,
                   help="add a marked block to FILE (e.g. ~/.bashrc) that activates the env")
    c = p.add_argument_group("cuDNN")
    c.add_argument("--cudnn-source", choices=("wheel", "redist", "archive"), default="wheel",
                   help="wheel (PyPI, default), redist (NVIDIA's redistributable archive), archive (a local file)")
    c.add_argument("--cudnn-mirror", metavar="URL", type=argtypes.url,
                   help="a mirror of NVIDIA's redist tree (with --cudnn-source redist)")
    c.add_argument("--cudnn-archive", metavar="PATH", type=non_empty,
                   help="a cuDNN archive you downloaded (with --cudnn-source archive)")
    c.add_argument("--cudnn-prefix", metavar="DIR", type=non_empty, help="place cuDNN here instead of inside the env")
    c.add_argument("--quarantine-stale", action="store_true",
                   help="move other cuDNN copies on the library path aside (undone by rollback)")
    add_cuda_source_flags(p)
    add_with_flags(p.add_argument_group("your project on top"))
    add_resolve_flags(p)
    add_assume_flags(p)


def add_with_flags(g: "argparse._ActionsContainer") -> None:
    """--with / --with-file (install; `add` takes the same file flag)."""
    g.add_argument("--with", dest="with_requirements", metavar="REQ", nargs="+", action="extend", default=[],
                   help="your own requirements, resolved with TensorFlow's pins (nothing TensorFlow needs can move)")
    g.add_argument("--with-file", dest="with_files", metavar="FILE", action="append", default=[], type=non_empty,
                   help="requirements from a requirements.txt, pylock.toml or pyproject.toml ([project] dependencies)")


def add_cuda_source_flags(p: argparse.ArgumentParser) -> None:
    """Where a release without CUDA wheels (TF 2.0-2.13) gets its CUDA user space."""
    g = p.add_argument_group("CUDA for releases without CUDA wheels (TF <= 2.13)")
    g.add_argument("--conda-channel", metavar="NAME|URL", default=None,
                   help="conda backend: the channel for Python and the cudatoolkit/cudnn packages "
                   "(default conda-forge)")
    g.add_argument("--cuda-source", choices=("default", "redist"), default="default",
                   help="default: conda packages on the conda backend; redist: NVIDIA's redistributable archives")
    g.add_argument("--cuda-mirror", metavar="URL", type=argtypes.url,
                   help="a mirror of NVIDIA's cuda/redist tree (with --cuda-source redist)")


def request_from_args(args: argparse.Namespace) -> "InstallRequest":
    from tfgpu_install.app.install import InstallRequest
    from tfgpu_install.app.resolution import ResolveRequest

    return InstallRequest(
        resolve=ResolveRequest(
            profile=args.profile, assume=assume_flags(args), allow_cpu=args.allow_cpu,
            allow_minor_compat=args.allow_minor_compat, restrict_gpus=args.restrict_gpus,
            strict_driver=args.strict_driver, python=args.python, backend=args.backend, conda_name=args.name,
            tensorflow=args.tensorflow,
        ),
        env=args.env, system_ldconfig=args.system_ldconfig, shell_rc=args.shell_rc, seed_pip=args.seed_pip,
        cudnn_source=args.cudnn_source, cudnn_mirror=args.cudnn_mirror, cudnn_archive=args.cudnn_archive,
        cudnn_prefix=args.cudnn_prefix, quarantine_stale=args.quarantine_stale, index_url=args.index_url,
        conda_channel=args.conda_channel, cuda_source=args.cuda_source, cuda_mirror=args.cuda_mirror,
        yes=args.yes, dry_run=args.dry_run, wait=args.wait, progress=not args.json,
        with_requirements=tuple(args.with_requirements), with_files=tuple(args.with_files),
    )


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.install import install, noop_message
    from tfgpu_install.app.noop import remember
    from tfgpu_install.runner import SubprocessRunner

    result = install(ctx, request_from_args(args))
    # A real, changed-or-checked env: the stamp the next identical run answers from (commands/noop.py).
    if result.exit_code == 0 and not result.data.get("dry_run") and isinstance(ctx.runner, SubprocessRunner):
        remember(args.argv, ctx, result.data, noop_message(result.data["env"]))
    return result
