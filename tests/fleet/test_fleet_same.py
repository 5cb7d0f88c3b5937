"""--same: the falling ceiling settles on the newest release every host can run."""

from __future__ import annotations

from pathlib import Path

from tfgpu_install.fleet.same import ceiling_policy_yaml, explain, next_round
from tfgpu_install.knowledge.load import load_knowledge, load_policy
from tfgpu_install.knowledge.schema import parse_policy

REPO = Path(__file__).resolve().parents[2]


def test_all_hosts_agree_stops() -> None:
    step = next_round({"a": "2.15.1", "b": "2.15.1"})
    assert (step.common, step.ceiling) == ("2.15.1", None)


def test_mixed_hosts_lower_the_ceiling_to_the_oldest_choice() -> None:
    step = next_round({"new": "2.21.0", "old": "2.15.1", "mid": "2.9.3"})
    assert step.common is None
    assert step.ceiling == "2.9.3"  # compared as versions, not strings ("2.9" < "2.15")
    assert step.limited_by == ("mid",)


def test_a_host_with_no_choice_means_no_common_release() -> None:
    step = next_round({"a": "2.15.1", "b": None})
    assert (step.common, step.ceiling, step.missing) == (None, None, ("b",))


def test_explain_names_who_held_the_fleet_back() -> None:
    lines = explain("2.98.0", {"node1": "2.99.0", "node2": "2.98.0"}, ("node2",))
    assert lines[0] == "TF 2.98.0 is the newest release every host can run"
    assert "node1 alone would run TF 2.99.0" in lines
    assert lines[-1].startswith("held back by node2")


def test_ceiling_policy_keeps_the_profile_rules_and_loads(tmp_path: Path) -> None:
    stable = load_policy("stable", load_knowledge(REPO / "profiles"))
    path = tmp_path / "same.yaml"
    path.write_text(ceiling_policy_yaml(stable, "2.15.1"))
    got = parse_policy(path, str(path))
    assert got.tensorflow == "<=2.15.1"
    assert (got.prefer, got.require_patch_release, got.min_age_days, got.cuda_from, got.allow_defects) == (
        stable.prefer, stable.require_patch_release, stable.min_age_days, stable.cuda_from, stable.allow_defects)
    assert "fleet --same" in got.source
