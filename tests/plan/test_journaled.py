"""The journaled plan is typed once where it is read (plan/journaled.py): each shape a run
journals reads back as itself and rebuilds the same steps; a damaged one is unknown, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfgpu_install.plan.journaled import JournaledPlan, RestoreRecord, read_plan
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.model import Choice, Resolution
from tfgpu_install.snapshot.document import Package

CHOICE = Choice(tensorflow="2.17.1", cuda="12.3", cudnn="8.9", python="3.11", jit_only=False,
                python_path="/usr/bin/python3.11", pins={"nvidia-cudnn-cu12": "8.9.7.29"})
RES = Resolution(profile="stable", choice=CHOICE, reasons=("fits",), rejected=())
OPTIONS = InstallOptions(env=Path("/envs/tf"), with_requirements=("pandas>=2",))
PLANS = {
    "install": JournaledPlan(RES, OPTIONS),
    "restore": JournaledPlan(RES, OPTIONS, RestoreRecord("snap-1", True, "", (Package("numpy", "1.26.4", ("h",)),))),
    "kernel": JournaledPlan(RES, OPTIONS, kernel={"env": "/envs/tf", "kernel_dir": "/k/tf", "display_name": "TF"}),
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_journaled_plan_reads_back_as_itself(name: str) -> None:
    plan = PLANS[name]
    assert read_plan(plan.to_json()) == plan
    assert [s.id for s in read_plan(plan.to_json()).steps()] == [s.id for s in plan.steps()]  # type: ignore[union-attr]


def test_each_shape_rebuilds_its_own_steps() -> None:
    assert [s.id for s in PLANS["kernel"].steps()] == ["kernel.register"]
    assert "packages.sync" in [s.id for s in PLANS["restore"].steps()]
    assert "packages.sync" not in [s.id for s in PLANS["install"].steps()]


@pytest.mark.parametrize("data", [
    None, {}, {"options": {"env": "/e"}},
    {"resolution": {"choice": {"tensorflow": "2.17.1"}}, "options": {"env": "/e"}},
    {"resolution": {"profile": "x"}}, {"resolution": {"profile": "x"}, "options": {"backend": "venv"}}, [1, 2],
])
def test_a_damaged_plan_is_unknown_not_a_crash(data: object) -> None:
    """These raised KeyError/TypeError out of rollback (exit 1): a torn or edited journal line."""
    assert read_plan(data) is None


@pytest.mark.parametrize("field, value", [
    ("cuda", 12.3), ("tensorflow", ["2.17.1"]), ("pins", {"nvidia-cudnn-cu12": 8}), ("hashes", {"x": "sha256:ab"}),
    ("sonames", "libcudart.so.12"),
])
def test_a_choice_field_of_another_type_is_unknown(field: str, value: object) -> None:
    """The resolver's own reader checks each field's type (Choice(**data) took a cuda of 12.3, a pin of 8)."""
    good = PLANS["install"].to_json()
    assert read_plan(good) is not None  # the sane control
    choice = dict(good["resolution"]["choice"])  # type: ignore[index]
    bad = {**good, "resolution": {**good["resolution"], "choice": {**choice, field: value}}}  # type: ignore[dict-item]
    assert read_plan(bad) is None
