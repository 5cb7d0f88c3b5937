"""An independent audit of `doctor --log` (issue 38 item 5): real logs the doctor has never seen.

tests/fixtures/logs-audit: 45 TensorFlow failure logs from issue trackers no other fixture set draws from,
gathered and labelled by another hand than the rules' author, committed with their labels before the doctor
ran on any of them (see its README). The whole set is held out: no rule was written from it.

This module is a measurement, not a floor: it computes and prints the figure (judged by tests/doctor/wild.py's
`verdict`, the diagnosis fields alone) and never fails because the figure is low. What it asserts is that the
set stays what its README says: sourced, labelled, and disjoint from the other sets.
`python -m tests.doctor.test_doctor_audit` prints the figure and every miss."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import FIXTURES
from tests.doctor.wild import verdict
from tests.support.logmutate import MUTATIONS
from tfgpu_install.doctor.classify import CAUSE, HARMLESS_ONLY, UNKNOWN, classify
from tfgpu_install.doctor.rules import load_rules

AUDIT = FIXTURES / "logs-audit"
RULES = load_rules()
RULE_IDS = {r.id for r in RULES.rules}
HARMLESS_IDS = {r.id for r in RULES.rules if r.harmless}
# Decisive causes no rule of profiles/errors.yaml covers when the set was labelled: the name each would need.
NEW_RULE_NAMES = {
    "directml-no-xla", "jetson-container-no-nvmap", "numpy-aarch64-illegal-instruction",
    "package-tf-version-mismatch", "pip-build-missing-setuptools", "too-many-resources-for-launch",
    "tf-undefined-symbol",
}
# Every other set of real logs: no audit log may repeat one of their threads or come from their repositories.
EARLIER_SETS = ("logs-held", "logs-extra", "logs-kinds", "logs-wild", "shared/logs")
THREAD = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/\d+")


def audit_cases(directory: Path = AUDIT) -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.yaml"))]


def earlier_sources(sets: tuple[str, ...] = EARLIER_SETS) -> set[str]:
    out = set()
    for d in sets:
        out |= {yaml.safe_load(p.read_text(encoding="utf-8"))["source"] for p in (FIXTURES / d).glob("*.yaml")}
    return out


def repository(url: str) -> str:
    m = THREAD.fullmatch(url)
    return m.group(1).lower() if m else ""


def score(cases: list[dict[str, Any]], mutations: bool) -> tuple[int, int, list[str]]:
    """Right diagnoses, diagnoses made, and every miss as 'id (variant): what differs'."""
    right, total, misses = 0, 0, []
    for case in cases:
        variants = {"as posted": case["verbatim"]}
        if mutations:
            variants |= {name: f(case["verbatim"]) for name, f in MUTATIONS.items()}
        for name, text in variants.items():
            total += 1
            why = verdict(classify(text, RULES), case["label"])
            if why:
                misses.append(f"{case['id']} ({name}): {why}")
            else:
                right += 1
    return right, total, misses


def label_problems(case: dict[str, Any], new_rule_names: set[str] = NEW_RULE_NAMES) -> list[str]:
    """What is wrong with one case's source and label ('' list when nothing)."""
    wrong = []
    if not THREAD.fullmatch(case.get("source", "")):
        wrong.append(f"source is not an issue or pull-request thread: {case.get('source')!r}")
    if not str(case.get("verbatim", "")).strip():
        wrong.append("no verbatim text")
    label = case.get("label") or {}
    status, primary = label.get("status"), label.get("primary")
    if status not in (CAUSE, UNKNOWN, HARMLESS_ONLY):
        wrong.append(f"status {status!r}")
    if (status == CAUSE) != (primary is not None):
        wrong.append(f"status {status} with primary {primary!r}")
    if primary is not None and primary not in RULE_IDS and primary not in new_rule_names:
        wrong.append(f"primary {primary!r} is neither a rule nor a named new rule")
    for rid in label.get("others", []):
        if rid not in RULE_IDS:
            wrong.append(f"others names no rule: {rid!r}")
    for rid in label.get("harmless", []):
        if rid not in HARMLESS_IDS:
            wrong.append(f"harmless names no harmless rule: {rid!r}")
    if status == HARMLESS_ONLY and not label.get("harmless"):
        wrong.append("harmless-only without a harmless rule")
    return wrong


def test_the_set_is_sourced_and_labelled() -> None:
    cases = audit_cases()
    assert len(cases) >= 40
    assert len({c["id"] for c in cases}) == len(cases)
    problems = {c["id"]: p for c in cases if (p := label_problems(c))}
    assert problems == {}


def test_the_set_is_disjoint_from_every_other_set() -> None:
    """Not one thread, and not one repository, that an earlier set used (the route is new, not the threads)."""
    earlier = earlier_sources()
    earlier_repos = {repository(s) for s in earlier} - {""}
    for case in audit_cases():
        assert case["source"] not in earlier, case["id"]
        assert repository(case["source"]) not in earlier_repos, (case["id"], case["source"])


def test_the_checks_catch_a_bad_case(tmp_path: Path) -> None:
    """The attacks the two checks above exist for, each beside a sane control."""
    good = audit_cases()[0]
    assert label_problems(good) == []
    bad_labels = [
        {"status": "cause", "primary": None, "others": [], "harmless": []},  # a cause with no rule
        {"status": "unknown", "primary": "gpu-oom", "others": [], "harmless": []},  # unknown yet blamed
        {"status": "cause", "primary": "gpu-om", "others": [], "harmless": []},  # a typo for a rule id
        {"status": "cause", "primary": "gpu-oom", "others": [], "harmless": ["gpu-oom"]},  # blame filed harmless
        {"status": "harmless-only", "primary": None, "others": [], "harmless": []},
        {"status": "maybe", "primary": None, "others": [], "harmless": []},
    ]
    for label in bad_labels:
        assert label_problems(good | {"label": label}), label
    assert label_problems(good | {"source": "https://example.org/some-blog-post"})
    assert label_problems(good | {"verbatim": "  \n"})
    # a thread an earlier set already used is found by repository even when the issue number differs
    wild = next((FIXTURES / "logs-wild").glob("*.yaml"))
    used = yaml.safe_load(wild.read_text(encoding="utf-8"))["source"]
    assert repository(used) in {repository(s) for s in earlier_sources()}
    assert repository(re.sub(r"/\d+$", "/999999", used)) == repository(used)


def test_audit_figure_is_measured_and_printed() -> None:
    """The figure docs/guides/doctor.md reports. Printed, never asserted against a floor."""
    cases = audit_cases()
    posted, n, misses_posted = score(cases, mutations=False)
    right, total, _ = score(cases, mutations=True)
    print(f"audit: {posted}/{n} as posted, {right}/{total} with the six mutations; misses as posted: "
          f"{misses_posted}")
    assert n == len(cases) and total == n * (1 + len(MUTATIONS))


def print_report(name: str, every: list[dict[str, Any]]) -> None:
    """The figure, every miss as posted, each mutation's count (`python -m` of an audit module)."""
    by_status = Counter(c["label"]["status"] for c in every)
    p, n, m = score(every, mutations=False)
    r, t, mm = score(every, mutations=True)
    print(f"{name}: {n} logs ({dict(by_status)})")
    print(f"as posted: {p}/{n} = {p / n:.1%}")
    print(f"with mutations ({', '.join(MUTATIONS)}): {r}/{t} = {r / t:.1%}")
    for line in m:
        print("  miss (as posted):", line)
    for variant in MUTATIONS:
        got = sum(1 for line in mm if line.split(" (", 1)[1].startswith(variant + ")"))
        print(f"  {variant}: {len(every) - got}/{len(every)}")


def labelled_set_problems(directory: Path, new_rule_names: set[str]) -> dict[str, list[str]]:
    """An audit set's cases with something wrong in their source or label (at least 40 cases, ids unique)."""
    cases = audit_cases(directory)
    assert len(cases) >= 40
    assert len({c["id"] for c in cases}) == len(cases)
    return {c["id"]: p for c in cases if (p := label_problems(c, new_rule_names))}


def assert_disjoint(directory: Path, other_sets: tuple[str, ...]) -> None:
    """Not one thread, and not one repository, that another set used; one log per repository."""
    others = earlier_sources(other_sets)
    other_repos = {repository(s) for s in others} - {""}
    cases = audit_cases(directory)
    for case in cases:
        assert case["source"] not in others, case["id"]
        assert repository(case["source"]) not in other_repos, (case["id"], case["source"])
    assert len({repository(c["source"]) for c in cases}) == len(cases)


def measure_and_print(name: str, directory: Path) -> None:
    """The figure an audit module reports, printed, never asserted against a floor."""
    cases = audit_cases(directory)
    posted, n, misses_posted = score(cases, mutations=False)
    right, total, _ = score(cases, mutations=True)
    print(f"{name}: {posted}/{n} as posted, {right}/{total} with the six mutations; misses as posted: "
          f"{misses_posted}")
    assert n == len(cases) and total == n * (1 + len(MUTATIONS))


def report_main(name: str, directory: Path) -> None:
    """`python -m` of an audit module: the report, then every miss of a mutated variant."""
    print_report(name, audit_cases(directory))
    for line in score(audit_cases(directory), mutations=True)[2]:
        if " (as posted)" not in line:
            print("  miss (mutated):", line)


if __name__ == "__main__":
    print_report("logs-audit", audit_cases())
