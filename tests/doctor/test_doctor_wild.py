"""The doctor judged by its diagnosis fields alone on logs gathered by a second route (issue 38 item 5).

tests/fixtures/logs-wild: 61 real failure logs from trackers and forums the earlier fixtures never used, each
labelled (status, primary, others, harmless) before the doctor ran on it, and split tune/heldout before any rule
was written (see its README). tests/fixtures/logs-kinds: more real logs for the new rules (never held out).
`python -m tests.doctor.test_doctor_wild` prints the figures."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.doctor.wild import cases, kind_mutation_misses, verdict
from tests.support.logmutate import MUTATIONS
from tfgpu_install.doctor.classify import CAUSE, classify
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()
KINDS = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((FIXTURES / "logs-kinds").glob("*.yaml"))]
# The kinds issue 38 found missed, each a rule now; every one needs >= 3 real logs (tune half + logs-kinds).
NEW_RULES = {
    "docker-no-gpu-runtime", "no-tf-wheel-for-python", "glibc-too-old", "keras3-legacy-savedmodel",
    "host-pinned-memory-exhausted", "nccl-error", "ray-worker-no-gpu", "sudo-other-python", "xla-unsupported-op",
    "driver-older-than-ptx-compiler", "windows-native-gpu-ended", "cudnn-arch-mismatch", "ptx-isa-too-old-for-gpu",
}
# Searched for and not found: public logs that show BOTH native Windows and a TensorFlow >= 2.11 version next to
# the missing GPU (most reports are prose or screenshots; a bare `[]` decides nothing and stays "unknown").
FEWER_THAN_THREE = {"windows-native-gpu-ended": 1, "ptx-isa-too-old-for-gpu": 1}
# Held-out figure measured when the rules were written (tests/fixtures/logs-wild/README.md): a floor, not a goal.
HELDOUT_FLOOR = 0.95  # measured 180/189 (26/27 as posted) right after the rules were written


def score(split: str, mutations: bool = True) -> tuple[int, int, list[str]]:
    right, total, misses = 0, 0, []
    for case in cases(split):
        variants = {"as posted": case["verbatim"]}
        if mutations:
            variants |= {k: f(case["verbatim"]) for k, f in MUTATIONS.items()}
        for name, text in variants.items():
            total += 1
            why = verdict(classify(text, RULES), case["label"])
            if why:
                misses.append(f"{case['id']} ({name}): {why}")
            else:
                right += 1
    return right, total, misses


def test_the_set_is_sourced_labelled_and_split() -> None:
    all_cases = cases()
    assert len(all_cases) >= 60
    earlier = set()
    for d in ("logs-held", "logs-extra", "shared/logs"):
        earlier |= {yaml.safe_load(p.read_text(encoding="utf-8"))["source"] for p in (FIXTURES / d).glob("*.yaml")}
    for c in all_cases:
        assert c["source"].startswith("https://") and c["source"] not in earlier, c["id"]
        assert "github.com/tensorflow/tensorflow/" not in c["source"], c["id"]  # another route than TF's tracker
        assert c["split"] in ("tune", "heldout") and c["verbatim"].strip()
        label = c["label"]
        assert label["status"] in ("cause", "unknown", "harmless-only")
        assert (label["status"] == CAUSE) == (label["primary"] is not None)
    halves = defaultdict(int)
    for c in all_cases:
        halves[c["split"]] += 1
    assert halves["heldout"] >= 25 and halves["tune"] >= 25


def test_every_new_rule_has_three_real_logs() -> None:
    sources: dict[str, set[str]] = defaultdict(set)
    for c in cases("tune"):
        if c["label"]["primary"]:
            sources[c["label"]["primary"]].add(c["source"])
    for c in KINDS:
        sources[c["expected"]["rule"]].add(c["source"])
    for rule in NEW_RULES:
        RULES.by_id(rule)  # exists
        assert len(sources[rule]) >= FEWER_THAN_THREE.get(rule, 3), f"{rule}: {sorted(sources[rule])}"


@pytest.mark.parametrize("case", KINDS, ids=lambda c: c["id"])
def test_kind_log_as_posted(case: dict[str, Any]) -> None:
    d = classify(case["verbatim"], RULES)
    assert d.status == CAUSE and d.primary is not None and d.primary.rule_id == case["expected"]["rule"]
    assert d.primary.evidence and "?" not in d.primary.cause


def test_kind_logs_survive_most_mutations() -> None:
    """Wrapped, prefixed, coloured, Windows-pathed, noise in front: the same diagnosis. (Cutting the headline
    can remove the only line that names the cause: those count as misses here, not as excused.)"""
    right, total, misses = kind_mutation_misses(KINDS, RULES)
    assert right / total >= 0.9, misses


def test_tune_half_is_right() -> None:
    right, total, misses = score("tune")
    assert right / total >= 0.95, f"{right}/{total}: {misses}"


def test_heldout_half_figure() -> None:
    """The figure docs/ report. As posted and with every mutation; asserted only as the floor measured when
    the rules were written, so a regression fails while the number itself stays what it is."""
    right, total, misses = score("heldout")
    posted, n, _ = score("heldout", mutations=False)
    print(f"held-out: {posted}/{n} as posted, {right}/{total} with mutations; misses: {misses}")
    assert right / total >= HELDOUT_FLOOR, misses


if __name__ == "__main__":
    for split in ("tune", "heldout"):
        r, t, m = score(split)
        p, n, _ = score(split, mutations=False)
        print(f"{split}: {p}/{n} as posted = {p / n:.1%}; with mutations {r}/{t} = {r / t:.1%}")
        for line in m:
            print("  miss:", line)
