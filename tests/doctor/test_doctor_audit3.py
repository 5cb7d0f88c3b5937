"""A third audit of `doctor --log` (issue 38 item 5): real logs gathered by another route, measured before any
rule of this round changed.

tests/fixtures/logs-audit3: 42 TensorFlow / GPU-stack failure logs from 42 repositories no other set draws from,
found by where TensorFlow runs (container images and runtimes, cloud notebooks and jobs, HPC, distributions, Keras
trackers) rather than by error text (audit2) or project name (the first audit), and committed with their labels
(f645a0d) before the doctor ran on any of them and before any rule change of this round (see its README).

A measurement, not a floor: it computes and prints the figure (tests/doctor/wild.py's `verdict`, the diagnosis
fields alone) and never fails because the figure is low. It asserts that the set is sourced, labelled, and
disjoint from every other set (logs-audit and logs-audit2 included) by thread and by repository.
`python -m tests.doctor.test_doctor_audit3` prints the figure and every miss.

Blind, measured in the commit that added this module (before any rule change): 33/42 = 78.6% as posted, 226/294 =
76.9% with the six mutations. Misses as posted: 2 kinds without a rule (tf1-api-under-tf2, tf-trt-needs-tensorrt,
the same two audit2 found), 2 nvidia-container-cli messages no pattern knew (driver not loaded, cuda>= requirement),
4 wordings of existing rules (TF 0.x 'Couldn't open CUDA library libcuda.so.1', TF 1.x 'Could not find
'cudart64_90.dll'', an ImportError cut at 'cannot open s', cuBLAS/cuDNN handle failures under Windows build paths),
1 decided by the wrong rule (libcuda 367.57 against kernel module 367.48, read as cuInit's no-device).
"""

from __future__ import annotations

from tests.conftest import FIXTURES
from tests.doctor import test_doctor_audit as audit
from tests.doctor.test_doctor_audit2 import NEW_RULE_NAMES_2

AUDIT3 = FIXTURES / "logs-audit3"
# Every other set of real logs, both earlier audits included.
OTHER_SETS = (*audit.EARLIER_SETS, "logs-audit", "logs-audit2")


def test_the_set_is_sourced_and_labelled() -> None:
    assert audit.labelled_set_problems(AUDIT3, NEW_RULE_NAMES_2) == {}


def test_the_set_is_disjoint_from_every_other_set() -> None:
    """Not one thread, and not one repository, that another set used; one log per repository."""
    assert {"logs-kinds", "logs-audit", "logs-audit2"} <= set(OTHER_SETS)
    audit.assert_disjoint(AUDIT3, OTHER_SETS)


def test_the_checks_catch_a_bad_case() -> None:
    """The attacks the checks above exist for, each beside a sane control."""
    good = audit.audit_cases(AUDIT3)[0]
    assert audit.label_problems(good, NEW_RULE_NAMES_2) == []
    typo = {"status": "cause", "primary": "tf1-api-under-tf", "others": [], "harmless": []}
    assert audit.label_problems(good | {"label": typo}, NEW_RULE_NAMES_2)
    # an audit2 repository is caught only because logs-audit2 is among the other sets
    second = audit.repository(audit.audit_cases(FIXTURES / "logs-audit2")[0]["source"])
    assert second in {audit.repository(s) for s in audit.earlier_sources(OTHER_SETS)}
    assert second not in {audit.repository(s) for s in audit.earlier_sources((*audit.EARLIER_SETS, "logs-audit"))}


def test_audit3_figure_is_measured_and_printed() -> None:
    """The figure docs/guides/doctor.md reports. Printed, never asserted against a floor."""
    audit.measure_and_print("audit3", AUDIT3)


if __name__ == "__main__":
    audit.report_main("logs-audit3", AUDIT3)
