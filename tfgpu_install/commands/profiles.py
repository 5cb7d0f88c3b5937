"""`tfgpu-install profiles`: the profiles (policies over the knowledge), one line each.

`tfgpu-install profiles FILE.yaml` validates a user's own policy file and shows it the same way.
Exit 0; 5 (BAD_INPUT) when a file is malformed (the message names file:line).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import non_empty
from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.report import Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.knowledge.model import Knowledge, Policy


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE.yaml", type=non_empty,
                   help="also validate and show these policy files")


def rules(policy: "Policy") -> str:
    """The policy's filters in a few words, e.g. 'newest first; settled (patch or 90 days)'."""
    parts = [f"{policy.prefer} first"]
    if policy.require_patch_release:
        age = f" or {policy.min_age_days}+ days old" if policy.min_age_days else ""
        parts.append(f"settled only (a later patch or line{age})")
    elif policy.min_age_days:
        parts.append(f"{policy.min_age_days}+ days old")
    if policy.tensorflow:
        parts.append(f"tensorflow {policy.tensorflow}")
    parts.append("CUDA from " + "/".join(policy.cuda_from))
    if policy.allow_defects:
        parts.append("allows known defects")
    if not policy.jit_only_ok:
        parts.append("no PTX-only (JIT) GPUs")
    return "; ".join(parts)


def _policy_json(policy: "Policy", builtin: bool) -> JSONObject:
    return {
        "name": policy.name,
        "builtin": builtin,
        "description": policy.description,
        "rules": rules(policy),
        "prefer": policy.prefer,
        "require_patch_release": policy.require_patch_release,
        "min_age_days": policy.min_age_days,
        "tensorflow": policy.tensorflow,
        "allow_defects": policy.allow_defects,
        "cuda_from": list(policy.cuda_from),
        "jit_only_ok": policy.jit_only_ok,
        "path": policy.path,
        "source": policy.source,
    }


def _summary(kn: "Knowledge") -> JSONObject:
    versions = [r.tensorflow for r in kn.releases]
    return {
        "releases": len(versions),
        "newest": versions[0] if versions else None,
        "oldest": versions[-1] if versions else None,
        "driver_rows": len(kn.drivers),
        "gpu_models": len(kn.gpus),
        "directory": str(kn.directory) if kn.directory else None,
    }


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.profiles import profiles

    found = profiles(ctx, getattr(args, "files", None) or ())
    # One line per profile; the full rules are in --json (and `rules` here when wide enough).
    rows = [(p.name if builtin else str(p.path), p.description) for p, builtin in found.shown]
    s = _summary(found.knowledge)
    return Result(
        data={"profiles": [_policy_json(p, b) for p, b in found.shown], "knowledge": s},
        blocks=[
            table("Profiles", ("profile", "what it picks"), rows),
            Text(
                f"knowledge: {s['releases']} TensorFlow releases ({s['oldest']} .. {s['newest']}), "
                f"{s['driver_rows']} CUDA driver rows, {s['gpu_models']} GPU models; "
                "use one with `tfgpu-install plan --profile NAME` or a FILE.yaml of your own "
                f"(format: {found.example})",
                style="dim",
            ),
        ],
    )
