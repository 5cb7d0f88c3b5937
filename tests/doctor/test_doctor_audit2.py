"""A second independent audit of `doctor --log` (issue 38 item 5): real logs the doctor has never seen.

The first audit set (tests/fixtures/logs-audit) stopped being blind when rules were written for its kinds.
tests/fixtures/logs-audit2: 48 TensorFlow failure logs from 48 issue trackers no other set draws from, found by
error-text queries, gathered and labelled by another hand than the rules' author after those rules landed, and
committed with their labels before the doctor ran on any of them (see its README). Held out whole.

A measurement, not a floor: it computes and prints the figure (tests/doctor/wild.py's `verdict`, the diagnosis
fields alone) and never fails because the figure is low. It asserts that the set is sourced, labelled, and
disjoint from every other set (logs-audit and logs-kinds included) by thread and by repository.
`python -m tests.doctor.test_doctor_audit2` prints the figure and every miss."""

from __future__ import annotations

from tests.conftest import FIXTURES
from tests.doctor.test_doctor_audit import (
    EARLIER_SETS,
    assert_disjoint,
    audit_cases,
    earlier_sources,
    label_problems,
    labelled_set_problems,
    measure_and_print,
    report_main,
    repository,
)
from tfgpu_install.doctor.rules import load_rules

AUDIT2 = FIXTURES / "logs-audit2"
# Decisive causes no rule of profiles/errors.yaml covered when this set was labelled: the name each would need.
NEW_RULE_NAMES_2 = {"tf1-api-under-tf2", "tf-trt-needs-tensorrt"}
# Every other set of real logs, the first audit's included.
OTHER_SETS = (*EARLIER_SETS, "logs-audit")


def test_the_set_is_sourced_and_labelled() -> None:
    assert labelled_set_problems(AUDIT2, NEW_RULE_NAMES_2) == {}


def test_the_set_is_disjoint_from_every_other_set() -> None:
    """Not one thread, and not one repository, that another set used; one log per repository."""
    assert "logs-kinds" in OTHER_SETS and "logs-audit" in OTHER_SETS
    assert_disjoint(AUDIT2, OTHER_SETS)


def test_the_checks_catch_a_bad_case() -> None:
    """The attacks the checks above exist for, each beside a sane control."""
    good = audit_cases(AUDIT2)[0]
    assert label_problems(good, NEW_RULE_NAMES_2) == []
    new_named = next(c for c in audit_cases(AUDIT2) if c["label"]["primary"] in NEW_RULE_NAMES_2)
    assert label_problems(new_named, NEW_RULE_NAMES_2) == []
    # the two names this set gave causes no rule covered became rules in the third round (#38 item 5)
    assert NEW_RULE_NAMES_2 <= {r.id for r in load_rules().rules}
    assert label_problems(good | {"label": {"status": "cause", "primary": "tf1-api-under-tf", "others": [],
                                            "harmless": []}}, NEW_RULE_NAMES_2)
    # a first-audit repository is caught only because logs-audit is among the other sets
    first = audit_cases()[0]["source"]
    assert repository(first) in {repository(s) for s in earlier_sources(OTHER_SETS)}
    assert repository(first) not in {repository(s) for s in earlier_sources(EARLIER_SETS)}


def test_audit2_figure_is_measured_and_printed() -> None:
    """The figure docs/guides/doctor.md reports. Printed, never asserted against a floor."""
    measure_and_print("audit2", AUDIT2)


if __name__ == "__main__":
    report_main("logs-audit2", AUDIT2)
