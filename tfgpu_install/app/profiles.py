"""`profiles`: the policies over the knowledge, and any of the user's own policy files, validated
(commands/profiles.py renders them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from tfgpu_install.context import Context
from tfgpu_install.knowledge.model import Knowledge, Policy


@dataclass(frozen=True)
class Profiles:
    knowledge: Knowledge
    shown: tuple[tuple[Policy, bool], ...]  # (policy, built in?): the built-in ones, then the files given
    example: str  # what a policy file of one's own looks like


def profiles(ctx: Context, files: Sequence[str] = ()) -> Profiles:
    """The knowledge as install reads it (TFGPU_PROFILES_DIR too), its policies, and each file
    given validated against it (BAD_INPUT naming file:line when one is not a policy)."""
    from tfgpu_install.knowledge.load import load_knowledge, load_policy, policy_example

    kn = load_knowledge(ctx.profiles_dir, cache_dir=ctx.cache_dir)
    shown = [(p, True) for p in kn.policies.values()] + [(load_policy(f, kn), False) for f in files]
    return Profiles(kn, tuple(shown), policy_example(kn))
