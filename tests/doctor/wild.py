"""The second-route set (tests/fixtures/logs-wild): each log's label and how a diagnosis is judged against it.

A diagnosis is right only when every diagnosis field agrees with the label written before the doctor ran:
`status` equal, `primary`'s rule equal (none unless the status is a cause), every rule the label lists under
`others` / `harmless` present there, and nothing the label blames (primary or others) filed as harmless.
The checklist, `unexplained` and `stopped_by` earn nothing (they repeat the log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.logmutate import MUTATIONS
from tfgpu_install.doctor.classify import CAUSE, Diagnosis, classify
from tfgpu_install.doctor.rules import RuleSet

WILD = Path(__file__).resolve().parent.parent / "fixtures" / "logs-wild"


def cases(split: str | None = None) -> list[dict[str, Any]]:
    out = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(WILD.glob("*.yaml"))]
    return [c for c in out if split is None or c["split"] == split]


def verdict(d: Diagnosis, label: dict[str, Any]) -> str:
    """"" when the diagnosis agrees with the label, else what differs (for the failure message)."""
    primary = d.primary.rule_id if d.primary else None
    others = {f.rule_id for f in d.others}
    harmless = {f.rule_id for f in d.harmless}
    wrong = []
    if d.status != label["status"]:
        wrong.append(f"status {d.status} (label {label['status']})")
    if primary != label["primary"]:
        wrong.append(f"primary {primary} (label {label['primary']})")
    missing = set(label["others"]) - others
    if missing:
        wrong.append(f"others lack {sorted(missing)}")
    missing = set(label["harmless"]) - harmless
    if missing:
        wrong.append(f"harmless lack {sorted(missing)}")
    blamed_harmless = ({label["primary"]} | set(label["others"])) & harmless
    if blamed_harmless:
        wrong.append(f"filed as harmless: {sorted(blamed_harmless)}")
    return "; ".join(wrong)


def kind_mutation_misses(kinds: list[dict[str, Any]], rules: RuleSet) -> tuple[int, int, list[str]]:
    """logs-kinds cases (`expected.rule`) in every mutation: (right, total, misses as 'id (mutation)')."""
    right = total = 0
    misses = []
    for case in kinds:
        for name, mutate in MUTATIONS.items():
            total += 1
            d = classify(mutate(case["verbatim"]), rules)
            if d.primary is not None and d.primary.rule_id == case["expected"]["rule"]:
                right += 1
            else:
                misses.append(f"{case['id']} ({name})")
    return right, total, misses


def assert_kind_log(case: dict[str, Any], rules: RuleSet) -> None:
    """A logs-kinds case as posted: a cause, its expected rule, with evidence and a fully rendered text."""
    d = classify(case["verbatim"], rules)
    assert d.status == CAUSE and d.primary is not None and d.primary.rule_id == case["expected"]["rule"], d.to_json()
    assert d.primary.evidence and "?" not in d.primary.cause and "?" not in d.primary.fix


def assert_kind_mutations(kinds: list[dict[str, Any]], rules: RuleSet) -> None:
    """>= 95% of every logs-kinds case's mutations keep the expected rule, and only cut-headline may miss."""
    right, total, misses = kind_mutation_misses(kinds, rules)
    assert right / total >= 0.95, misses
    assert all(m.endswith("(cut-headline)") for m in misses), misses

