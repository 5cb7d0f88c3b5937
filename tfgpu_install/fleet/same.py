"""`--same`: one TensorFlow combination every host can run. Pure decisions.

Each host plans with a ceiling (a policy whose tensorflow is "<=X"); a host picks its newest release
under the ceiling. Start with no ceiling, lower it to the oldest choice, re-plan, and stop when every
host picks the same release: that is the newest release in the intersection of what the hosts can
run (for a newest-first policy). A host that picks nothing under a ceiling has no common release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from packaging.version import Version

from tfgpu_install.knowledge.model import Policy


@dataclass(frozen=True)
class SameStep:
    """What one planning round found and what the next round asks."""

    common: Optional[str]  # the release every host chose (done), or None
    ceiling: Optional[str]  # the next round's ceiling (None: stop)
    limited_by: tuple[str, ...]  # the hosts whose choice set the ceiling
    missing: tuple[str, ...]  # hosts that chose nothing (no common release exists)


def next_round(choices: Mapping[str, Optional[str]]) -> SameStep:
    missing = tuple(h for h, v in choices.items() if not v)
    if missing or not choices:
        return SameStep(None, None, (), missing)
    versions = {h: str(v) for h, v in choices.items()}
    lowest = min(versions.values(), key=Version)
    limited = tuple(h for h, v in versions.items() if Version(v) == Version(lowest))
    if len(set(versions.values())) == 1:
        return SameStep(lowest, None, limited, ())
    return SameStep(None, lowest, limited, ())


def explain(common: str, first_choices: Mapping[str, Optional[str]], limited_by: Sequence[str]) -> list[str]:
    """Why this release: which hosts held the fleet back, and what each could have run alone."""
    lines = [f"TF {common} is the newest release every host can run"]
    for host, v in first_choices.items():
        if v and v != common:
            lines.append(f"{host} alone would run TF {v}")
    if limited_by:
        lines.append("held back by " + ", ".join(limited_by) + f" (newest they can run: TF {common})")
    return lines


def ceiling_policy_yaml(policy: Policy, ceiling: str) -> str:
    """The profile's own rules plus the ceiling (joined with its tensorflow specifier, if any)."""
    spec = f"<={ceiling}" + (f",{policy.tensorflow}" if policy.tensorflow else "")
    lines = [
        "format: 1",
        f"name: {policy.name}-same",
        f'description: "{policy.name}, limited to what every host of the fleet can run (fleet --same)"',
        f"prefer: {policy.prefer}",
        f"require_patch_release: {str(policy.require_patch_release).lower()}",
        f"min_age_days: {policy.min_age_days}",
        f'tensorflow: "{spec}"',
        f"allow_defects: {str(policy.allow_defects).lower()}",
        "cuda_from: [" + ", ".join(policy.cuda_from) + "]",
        f"jit_only_ok: {str(policy.jit_only_ok).lower()}",
        f'source: "tfgpu-install fleet --same: profile {policy.name} with TF {spec} (the fleet\'s common ceiling)"',
    ]
    return "\n".join(lines) + "\n"
