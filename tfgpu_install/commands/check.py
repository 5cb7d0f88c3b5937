"""`tfgpu-install check [--env PATH]`: drift from the last known-good snapshot, and
every installed file against its distribution's record (like `rpm -V`).

Exit 0: no drift; 11 (DRIFT): something changed (for scripts and cron).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_env_flag
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.guard.shellquote import command
from tfgpu_install.report import Block, Bullets, Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.snapshot import Checked


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--full", action="store_true",
                   help="hash every installed file (default: sizes of all, sha256 of the shared libraries)")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.snapshot import check

    return checked(ctx, check(ctx, args.env, full=bool(getattr(args, "full", False)),
                              progress=not getattr(args, "json", False)))


def checked(ctx: Context, found: "Checked") -> Result:
    from tfgpu_install.app.snapshot import builds_line, files_json
    from tfgpu_install.commands.snapshot import with_skipped
    from tfgpu_install.env.hashing import workers
    from tfgpu_install.report import human_bytes
    from tfgpu_install.snapshot.drift import to_jsonable

    env, good, d, files, own, full = found.env, found.good, found.drift, found.files, found.own_changed, found.full
    data = {"env": str(env), "snapshot": good.id, **to_jsonable(d), "installed_files": files_json(files, good),
            "own_files_changed": list(own)}
    data["clean"] = found.clean
    what = (f"{files.files} installed files of {files.dists} distributions ("
            + (f"every file hashed: {human_bytes(files.read_bytes)} read on {workers()} threads" if full
               else f"sizes; sha256 of the {files.hashed} shared libraries") + ")")
    if found.clean:
        said = (f"{env} matches its known-good snapshot {good.id}" if good.builds() is not None else
                f"{env} matches its known-good snapshot {good.id} in packages, versions and files against "
                "their RECORDs; the builds are unknown")
        return with_skipped(Result(data, [Text(said, "ok"), Text(f"checked {what}", "dim"),
                                          Text(builds_line(files, good), "dim")]), found.store)
    blocks: list[Block] = [
        Text(f"{env} drifted from its known-good snapshot {good.id}" if not d.clean
             else f"{env}: installed files differ from what was installed", "warn"),
        Bullets("", tuple(d.lines()) + tuple(files.lines()) + tuple(f"tool file changed: {o}" for o in own), "warn"),
        Text(f"checked {what}", "dim"),
        Text(builds_line(files, good), "dim"),
    ]
    if not files.clean or own:
        blocks.append(Text("to repair: run the same install again (it reinstalls the damaged distributions), or "
                           f"`{command(ctx, 'tfgpu-install', 'snapshot', 'restore', good.id, '--env', str(env))}`"))
    else:
        # a change the user made on purpose (a `pip install`): keep it, or go back
        accept = command(ctx, 'tfgpu-install', 'accept', '--env', str(env))
        data["accept"] = accept
        blocks.append(Text(f"to keep these changes: `{accept}` (verifies the env as it is, then records it as the "
                           "new known-good)"))
        blocks.append(Text("to go back: "
                           f"`{command(ctx, 'tfgpu-install', 'snapshot', 'restore', good.id, '--env', str(env))}`"))
    return with_skipped(Result(data, blocks, exit_code=int(ExitCode.DRIFT)), found.store)
