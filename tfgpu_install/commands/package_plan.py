"""The package changes of an install or `add`, worded for people (app/package_plan.py works them out):
before (the dry run, the confirmation: what uv says it would add, change and remove) and after (what the
run did to the packages the env had)."""

from __future__ import annotations

from typing import Optional

from tfgpu_install.report import Block, Bullets, Text, table
from tfgpu_install.steps.package_changes import PackageChanges


def package_blocks(changes: Optional[PackageChanges]) -> list[Block]:
    """Every package the run will add, change or remove, with versions; what it changes of the packages
    the env has now (a user's own among them) said first, as a warning."""
    if changes is None:
        return []
    if changes.unknown or changes.empty:
        return [Text(changes.summary(), "dim")]
    blocks: list[Block] = []
    mine = changes.of_installed()
    if not mine.empty:
        blocks.append(Bullets("this changes packages the env has now", tuple(mine.described()), "warn"))
    blocks.append(table(changes.summary(), ("", "package", "now", "then"), changes.rows()))
    return blocks


def changed_in_env_blocks(changes: Optional[PackageChanges]) -> list[Block]:
    """After a run: the packages the env had that it changed or removed (with -y nobody was asked first)."""
    if changes is None or changes.of_installed().empty:
        return []
    return [Bullets("changed packages the env had", tuple(changes.of_installed().described()), "warn")]
