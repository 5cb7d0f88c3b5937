"""How `doctor --log` decides status, primary and harmless: the logic flaws the independent audit found
(issue 43 item 1, issue 38 item 5), each a general rule of decision, tested on the fixture logs outside the
audit set (tests/fixtures/logs-{wild,extra,held,kinds}, shared/logs) and tests/support/logmutate.py.

1. "harmless-only" means nothing in the log is wrong: known noise, and no line that stopped the program and
   no error-looking line that no rule explains. (Noise in front of a failure no rule knows said "nothing
   wrong" while the failing line was still there.)
2. A line that says of itself that it is not a failure (TensorFlow's BFC allocator: "ran out of memory ...
   The caller indicates that this is not a failure") is evidence for no cause.
3. A paste that lost its first line keeps the diagnosis when a later line carries the same evidence."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.support.logmutate import MUTATIONS, NOISE, cut_headline, noise_before, wrap
from tfgpu_install.doctor import logtext
from tfgpu_install.doctor.classify import CAUSE, HARMLESS_ONLY, UNKNOWN, _matches, classify
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()
SETS = ("logs-wild", "logs-extra", "logs-held", "logs-kinds", "shared/logs")  # never logs-audit


def _case(rel: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / rel).read_text(encoding="utf-8"))


def _logs() -> list[tuple[str, str]]:
    return [(p.stem, yaml.safe_load(p.read_text(encoding="utf-8"))["verbatim"])
            for d in SETS for p in sorted((FIXTURES / d).glob("*.yaml"))]


def _unexplained_lines() -> list[str]:
    """Every error-looking line of a real log (outside the audit) that no rule explains and that decides no
    cause on its own: the failures doctor does not know."""
    out = []
    for _, text in _logs():
        text = logtext.clean(text)
        for entry in logtext.unexplained(text, _matches(text, RULES).explained()):
            line = entry.split(": ", 1)[1]
            if classify(line, RULES).primary is None:
                out.append(line)
    return out


UNEXPLAINED = _unexplained_lines()


def test_there_are_real_unexplained_lines_and_most_are_no_exception() -> None:
    assert len(UNEXPLAINED) >= 30
    # the lines the first version missed: a failure that is not a Python exception / fatal line
    assert sum(1 for line in UNEXPLAINED if logtext.stop_region(line) is None) >= 10


@pytest.mark.parametrize("line", UNEXPLAINED)
def test_noise_before_a_line_no_rule_explains_is_never_harmless_only(line: str) -> None:
    """Catches the old rule of decision (harmless-only unless a stop line was seen): an `E ...]` line, a
    `CUDNN_STATUS_EXECUTION_FAILED`, an `OP_REQUIRES failed` after TF's start-up noise read "nothing wrong"."""
    d = classify(NOISE + line + "\n", RULES)
    assert d.status == UNKNOWN and d.primary is None
    assert d.harmless and any(line.strip()[:100] in u for u in d.unexplained)


def test_noise_alone_is_harmless_only() -> None:
    d = classify(NOISE, RULES)  # control
    assert d.status == HARMLESS_ONLY and not d.unexplained


def _harmless_only_logs() -> list[tuple[str, str]]:
    out = []
    for p in sorted((FIXTURES / "logs-wild").glob("*.yaml")) + sorted((FIXTURES / "logs-extra").glob("*.yaml")):
        c = yaml.safe_load(p.read_text(encoding="utf-8"))
        if (c.get("label") or c.get("expected"))["status"] == HARMLESS_ONLY:
            out.append((c["id"], c["verbatim"]))
    out.append(("case_045", _case("shared/logs/case_045.yaml")["verbatim"]))
    return out


@pytest.mark.parametrize("name", [n for n in MUTATIONS if n != "cut-headline"])
def test_known_noise_stays_harmless_only_as_pastes_arrive(name: str) -> None:
    """The control for the stricter rule: real noise-only logs are still "nothing wrong" when a terminal
    wrapped them (a harmless line's second row is its own, not unexplained), behind a logger prefix that
    says ERROR on every line (a word every line carries says nothing of one line), coloured, with
    Windows paths, or behind more noise. (Cut-headline may remove a log's only line.)"""
    logs = _harmless_only_logs()
    assert len(logs) >= 5
    if name == "windows-paths":  # ldconfig's WSL notice names a Linux path that no Windows paste rewrites
        logs = [(n, text) for n, text in logs if n != "extra_016"]
    wrong = {}
    for n, text in logs:
        d = classify(MUTATIONS[name](text), RULES)
        if d.status != HARMLESS_ONLY:
            wrong[n] = d.unexplained
    assert wrong == {}


def test_every_line_of_repeated_noise_is_explained() -> None:
    """A rule quotes its first few lines as evidence; all its lines are explained (a 12-line NUMA burst
    read "unknown" from its ninth line on when only the quoted lines counted)."""
    line = next(x for x in _case("logs-wild/wild_wsl_numa_only.yaml")["verbatim"].split("\n") if "NUMA node" in x)
    text = "\n".join(line.replace(line[:26], f"2024-01-01 00:00:{i:02d}.000", 1) for i in range(12))
    d = classify(text, RULES)
    assert d.status == HARMLESS_ONLY and not d.unexplained


def test_a_context_rule_explains_no_line() -> None:
    """tf-binary-le-2-10 (info: 'a TF <= 2.10 binary') quotes every line with a tensorflow/stream_executor/
    path; that does not explain an error on such a line."""
    # a cuDNN RNN kernel failing at run time, as a public script quotes TF 2.4's log (no rule knows it)
    line = "2021-04-11 16:53:06.007063: E tensorflow/stream_executor/dnn.cc:616] CUDNN_STATUS_INTERNAL_ERROR"
    d = classify(NOISE + line + "\n", RULES)
    assert d.status == UNKNOWN and "tf-binary-le-2-10" in {f.rule_id for f in d.others}


def test_a_glog_check_cut_from_its_prefix_still_stopped_the_program() -> None:
    """`F ...] Check failed:` aborts the process; pasted from mid-line (no `F`), it still does."""
    full = next(x for x in _case("logs-extra/extra_002.yaml")["verbatim"].split("\n") if "Check failed" in x)
    cut = full[full.index("tensorflow/"):]
    for text in (NOISE + full, NOISE + cut):
        d = classify(text, RULES)
        assert d.status == UNKNOWN and "Check failed" in d.stopped_by


def test_an_ipython_header_stopped_the_program() -> None:
    """IPython puts the exception's name first ('InternalError    Traceback (most recent call last)'); an
    excerpt cut before the message still ended in that exception."""
    head = "\n".join(_case("logs-held/init-oom_4.yaml")["verbatim"].split("\n")[:5])
    d = classify(NOISE + head, RULES)
    assert d.status == UNKNOWN and "InternalError" in d.stopped_by and "Traceback" in d.stopped_by


# -- 2. a line that disclaims itself
def _bfc_line() -> str:
    text = _case("logs-wild/wild_t2t_gpu_oom.yaml")["verbatim"]
    return next(x for x in text.split("\n") if "not a failure" in x)


@pytest.mark.parametrize("name", ["as posted", *MUTATIONS])
def test_the_allocator_saying_not_a_failure_is_no_oom(name: str) -> None:
    """Catches gpu-oom read off 'Allocator (GPU_0_bfc) ran out of memory ... The caller indicates that this is
    not a failure': in every mutation (wrapped: the disclaimer lands on the next row of the same line)."""
    line = _bfc_line()
    text = "".join(line.replace("16.536752", f"16.53675{i}") + "\n" for i in range(3))
    d = classify(MUTATIONS[name](text) if name in MUTATIONS else text, RULES)
    assert d.primary is None and "gpu-oom" not in {f.rule_id for f in d.others}
    assert "bfc-not-a-failure" in {f.rule_id for f in d.harmless}
    assert d.status == HARMLESS_ONLY


def test_a_real_oom_after_the_disclaimer_is_still_an_oom() -> None:
    """Control: the same log's `OOM when allocating tensor` is a GPU OOM, as posted and wrapped."""
    text = _case("logs-wild/wild_t2t_gpu_oom.yaml")["verbatim"]
    for t in (text, wrap(text)):
        d = classify(t, RULES)
        assert d.status == CAUSE and d.primary is not None and d.primary.rule_id == "gpu-oom"
        assert all("not a failure" not in e for e in d.primary.evidence)


def test_disclaims_is_only_for_harmless_rules() -> None:
    assert {r.id for r in RULES.rules if r.disclaims} == {"bfc-not-a-failure"}
    assert all(r.harmless for r in RULES.rules if r.disclaims)


# -- 3. evidence a later line carries too
LATER_LINE = {
    # the fixture, the rule its full text names, what the diagnosis must still say without the first line
    "shared/logs/case_029.yaml": ("cannot-dlopen-gpu-libs", "Skipping registering GPU devices"),
    "logs-extra/extra_022.yaml": ("ngc-container-no-driver", "nvidia-docker run"),
    "logs-kinds/kind_driver_older_ptx_af3.yaml": ("driver-older-than-ptx-compiler", "XLA is disabling"),
    "logs-kinds/kind_driver_older_ptxas_colabfold.yaml": ("driver-older-than-ptx-compiler", "XLA is disabling"),
}


@pytest.mark.parametrize("rel", sorted(LATER_LINE))
def test_a_later_line_keeps_the_diagnosis_when_the_first_is_cut(rel: str) -> None:
    rule, later = LATER_LINE[rel]
    text = _case(rel)["verbatim"]
    for t in (text, cut_headline(text)):
        d = classify(t, RULES)
        assert d.status == CAUSE and d.primary is not None and d.primary.rule_id == rule, t[:200]
        assert "?" not in d.primary.cause and "?" not in d.primary.fix
    d = classify(cut_headline(text), RULES)
    assert any(later in e for e in d.primary.evidence)  # type: ignore[union-attr]


def test_the_driver_older_sentence_says_its_versions_are_not_in_the_text() -> None:
    d = classify(cut_headline(_case("logs-kinds/kind_driver_older_ptx_af3.yaml")["verbatim"]), RULES)
    assert d.primary is not None and "(version not in this text)" in d.primary.cause
    full = classify(_case("logs-kinds/kind_driver_older_ptx_af3.yaml")["verbatim"], RULES)
    assert full.primary is not None and "12.2" in full.primary.cause and "12.6" in full.primary.cause  # control


def _cudart_with_gpu() -> str:
    """Real lines: TF's failed libcudart load and its note (logs-extra/extra_012), then the Linux driver's
    libcuda opened (logs-wild/wild_softlearning_ray_nodevice, its ray prefix removed)."""
    cudart = _case("logs-extra/extra_012.yaml")["verbatim"].strip().split("\n")[:2]
    libcuda = next(x for x in _case("logs-wild/wild_softlearning_ray_nodevice.yaml")["verbatim"].split("\n")
                   if "Successfully opened dynamic library libcuda.so" in x)
    return "\n".join([*cudart, libcuda[libcuda.index("2020-"):]]) + "\n"


def test_tf_note_under_a_failed_cudart_load_names_it_when_a_gpu_is_set_up() -> None:
    text = _cudart_with_gpu()
    full = classify(text, RULES)
    assert full.primary is not None and full.primary.rule_id == "missing-cuda-lib"
    assert "libcudart.so.11.0" in full.primary.cause  # the headline's own numbers win
    d = classify(cut_headline(text), RULES)
    assert d.status == CAUSE and d.primary is not None and d.primary.rule_id == "missing-cuda-lib"
    assert "this text lacks it" in d.primary.cause and "?" not in d.primary.cause


def test_tf_note_without_a_gpu_set_up_stays_harmless() -> None:
    """Control: the note is what it says on a machine without a GPU driver (no libcuda opened)."""
    note = _case("logs-extra/extra_012.yaml")["verbatim"].strip().split("\n")[1]
    d = classify(note + "\n", RULES)
    assert d.status == HARMLESS_ONLY and d.primary is None


def test_noise_before_keeps_every_fixture_cause() -> None:
    """The stricter harmless-only rule changes no diagnosis that had a cause (regression guard)."""
    changed = []
    for name, text in _logs():
        before = classify(text, RULES)
        if before.status == CAUSE:
            after = classify(noise_before(text), RULES)
            if after.primary is None or after.primary.rule_id != before.primary.rule_id:  # type: ignore[union-attr]
                changed.append(name)
    assert changed == []
