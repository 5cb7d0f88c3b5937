"""Classify a pasted TensorFlow / pip / nvidia-smi / loader output: cause + fix. Pure.

How the primary cause is chosen (bottom-up, like the machine walk):
  1. harmless rules (known noise) and `info` rules (context) are never the cause;
  2. a rule whose `yields_to` names another rule that also matched is only a symptom;
  3. what stopped the program wins: a rule that explains the last exception / fatal line
     (logtext.stop_region) beats earlier warnings and errors the program survived;
  4. among the rest, the lowest layer wins (a broken driver explains a missing device, not
     the other way round); within a layer the more specific rule, then error over warning,
     then the earlier line.
Nothing matched -> status "unknown" with the error-looking lines no rule explained; the generic
layer-by-layer checklist comes under its own key (`checklist`), labelled as not a diagnosis.
The text is read as pasted and, when a terminal hard-wrapped it, with those lines joined; ANSI
colours are removed first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from tfgpu_install.doctor import logtext
from tfgpu_install.doctor.gpuknowledge import KernelRows, explain, read_facts
from tfgpu_install.doctor.rules import LineIndex, Match, Rule, RuleSet, match_all
from tfgpu_install.guard.jsondoc import JSONObject

UNKNOWN = "unknown"  # nothing we know in the text
HARMLESS_ONLY = "harmless-only"  # only known noise: nothing wrong in this log
CAUSE = "cause"  # a cause was found

_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
MAX_LINE = 500  # an evidence line is quoted up to this many characters
CHECKLIST_LABEL = ("generic checklist, not a diagnosis: nothing in this text names a cause; "
                   "these are the layers to check, bottom-up")


@dataclass(frozen=True)
class Finding:
    rule_id: str
    layer: str
    severity: str
    harmless: bool
    cause: str
    fix: str
    fix_kind: str
    source: str
    evidence: tuple[str, ...]  # the log lines that show it, "L12: <line>"
    first_line: int
    knowledge: str = ""  # the knowledge row that names the cause ("profiles/kernels.yaml:12 (blackwell-ptx-jit)")

    def to_json(self) -> JSONObject:
        return {
            "rule": self.rule_id, "layer": self.layer, "severity": self.severity,
            "harmless": self.harmless, "cause": self.cause, "fix": self.fix,
            "fix_kind": self.fix_kind, "source": self.source, "evidence": list(self.evidence),
            "knowledge": self.knowledge or None,
        }


@dataclass(frozen=True)
class Diagnosis:
    status: str  # CAUSE | HARMLESS_ONLY | UNKNOWN
    primary: Optional[Finding]
    others: tuple[Finding, ...]  # other non-harmless findings (symptoms, context, warnings)
    harmless: tuple[Finding, ...]  # known noise met in the text: not to be blamed
    advice: tuple[str, ...]  # layer-by-layer checks, given when no cause was found
    unexplained: tuple[str, ...] = ()  # error-looking lines ("L12: ...") no rule explained
    stopped_by: str = ""  # the line that stopped the program ("L40: ..."), "" when none was seen

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.primary.evidence if self.primary else ()

    def to_json(self) -> JSONObject:
        return {
            "status": self.status,
            "primary": self.primary.to_json() if self.primary else None,
            "others": [f.to_json() for f in self.others],
            "harmless": [f.to_json() for f in self.harmless],
            "advice": list(self.advice),  # kept for old readers: the same steps as checklist.steps
            "checklist": {"label": CHECKLIST_LABEL, "steps": list(self.advice)} if self.advice else None,
            "unexplained": list(self.unexplained),
            "stopped_by": self.stopped_by or None,
        }


def _finding(m: Match) -> Finding:
    r = m.rule
    return Finding(
        rule_id=r.id, layer=r.layer, severity=r.severity, harmless=r.harmless,
        cause=m.render(r.cause), fix=m.render(r.fix), fix_kind=r.fix_kind, source=r.source,
        evidence=tuple(f"L{no}: {line[:MAX_LINE]}" for no, line in m.lines),
        first_line=m.lines[0][0] if m.lines else 0,
    )


def layer_advice(rules: RuleSet) -> tuple[str, ...]:
    return tuple(f"{i}. {layer.title}: {layer.check}" for i, layer in enumerate(rules.layers, 1))


def _blank(text: str, rows: set[int]) -> str:
    """text with the given 1-based lines emptied (the line count, and so every line number, kept)."""
    if not rows:
        return text
    lines = text.split("\n")
    for no in rows:
        lines[no - 1] = ""
    return "\n".join(lines)


def _disclaimed(logical: str, rules: RuleSet) -> set[int]:
    """The logical lines (1-based) a `disclaims` rule matched: a line that says of itself that it is not a
    failure (TensorFlow's BFC allocator: "ran out of memory ... The caller indicates that this is not a
    failure") is no evidence for any cause, however alarming its first words."""
    index = LineIndex(logical)
    out: set[int] = set()
    for rule in rules.rules:
        if rule.disclaims:
            for pat in rule.patterns:
                out |= {index.line_at(m.start())[0] for m in pat.finditer(logical)}
    return out


def _hits(rule: Rule, index: LineIndex) -> set[int]:
    """Every line (1-based) one of the rule's patterns matches on: all of them, not the first few it quotes."""
    return {index.line_at(m.start())[0] for pat in rule.patterns for m in pat.finditer(index.text)}


@dataclass(frozen=True)
class _Read:
    text: str  # as pasted (colours removed)
    matches: list[Match]
    read: str  # the text the stop line is read in: joined where a terminal wrapped, disclaimed lines emptied
    void: frozenset[int]  # pasted lines that disclaim themselves: explained, and evidence for nothing
    joined: Optional[logtext.Unwrapped]  # the logical lines, when a terminal wrapped the paste
    spans: tuple[range, ...]  # logical line i+1 -> the pasted lines it was cut into (joined only)

    def explained(self) -> set[int]:
        """The pasted lines a rule accounts for: every line a harmless, error or warning rule's patterns
        match (as pasted, and joined: every row of a wrapped line), and the lines that disclaim themselves.
        An info rule (context such as "a TF <= 2.10 binary", read off a file path) explains no line."""
        rules = [m.rule for m in self.matches if m.rule.harmless or m.rule.severity != "info"]
        out = set(self.void)
        blanked = _blank(self.text, set(self.void))
        pasted, causes = LineIndex(self.text), LineIndex(blanked)
        for rule in rules:
            out |= _hits(rule, pasted if rule.harmless else causes)
        if self.joined is not None:
            logical, read = LineIndex(self.joined.text), LineIndex(self.read)
            rows = {row: span for span in self.spans for row in span}
            out = {row for no in out for row in rows.get(no, (no,))}
            for rule in rules:
                out |= {row for no in _hits(rule, logical if rule.harmless else read) for row in self.spans[no - 1]}
        return out


def _matches(text: str, rules: RuleSet) -> _Read:
    """Every rule's match on text, plus the rules that only match once hard-wrapped lines are
    joined (their evidence renumbered to the pasted lines). Harmless rules read the text as pasted; the
    others read it without the lines that disclaim themselves (a wrapped one emptied on every row)."""
    joined = logtext.unwrap(text)
    logical = joined.text if joined is not None else text
    void_logical = _disclaimed(logical, rules)
    spans: tuple[range, ...] = ()
    if joined is None:
        void = void_logical
    else:
        ends = joined.origin[1:] + (text.count("\n") + 2,)
        spans = tuple(range(start, end) for start, end in zip(joined.origin, ends))
        void = {row for no in void_logical for row in spans[no - 1]}
    noise = replace(rules, rules=tuple(r for r in rules.rules if r.harmless))
    causes = replace(rules, rules=tuple(r for r in rules.rules if not r.harmless))
    matches = match_all(noise, text) + match_all(causes, _blank(text, void))
    if joined is None:
        return _Read(text, matches, _blank(text, void), frozenset(void), None, ())
    seen = {m.rule.id for m in matches}
    read = _blank(joined.text, void_logical)
    for m in match_all(noise, joined.text) + match_all(causes, read):
        if m.rule.id not in seen:
            lines = tuple((joined.origin[no - 1], line) for no, line in m.lines)
            matches.append(replace(m, lines=lines))
    return _Read(text, matches, read, frozenset(void), joined, spans)


def _stop_text(text: str) -> tuple[str, str]:
    """The lines that stopped the program (the region's text) and its first line as evidence."""
    region = logtext.stop_region(text)
    if region is None:
        return "", ""
    lines = text.split("\n")[region[0] - 1 : region[1]]
    return "\n".join(lines), f"L{region[0]}: {lines[0].strip()[:300]}" if lines else ""


def _primary(matches: list[Match], rules: RuleSet, stop: str) -> Optional[Match]:
    """The cause: not harmless, not info, not a symptom of another match; what stopped the program
    first, then the lowest layer, the more specific rule, error over warning, the earlier line."""
    matched_ids = {m.rule.id for m in matches}
    candidates = [
        m for m in matches
        if not m.rule.harmless and m.rule.severity != "info"
        and not any(y in matched_ids for y in m.rule.yields_to)
    ]

    def key(m: Match) -> tuple[int, int, int, int, int]:
        stopped_it = bool(stop) and any(p.search(stop) for p in m.rule.patterns)
        return (0 if stopped_it else 1, rules.layer_index(m.rule.layer), -m.rule.specificity,
                _SEVERITY_RANK[m.rule.severity], m.lines[0][0] if m.lines else 0)

    return min(candidates, key=key) if candidates else None


_WARNING_LINE = re.compile(
    r"(?:^|\s|\d)W(?:\d{4})?\s+\S+\]|\bW (?:tensorflow|external|third_party)/|\bWARNING\b|\bWarning:")
_GPU_WORDS = re.compile(r"GPU|gpu|CUDA|cuda|cuDNN|cudnn|[Dd]evice|DNN|libcu|nvidia|NVIDIA|XLA|ptx|PTX")


# Where a log record starts: a glog/absl line, a Python logging level, a time stamp. A line that starts none
# continues the record above it (TF's "Cannot dlopen some GPU libraries ..." warning goes on with
# "Skipping registering GPU devices..." on a line of its own).
_RECORD_START = re.compile(
    r"(?:^|\s)[IWEF](?:\d{4})?\s+\S+\]|\b[IWEF] (?:tensorflow|external|third_party)/"
    r"|\b(?:INFO|WARNING|ERROR|CRITICAL)\b|^\s*\d{4}-\d\d-\d\d[ T]\d"
    r"|^\s*Traceback \(|^\s*[A-Za-z_.]*(?:Error|Exception|Warning)\b")
MAX_CONTINUATION = 5  # a multi-line log message rarely runs on longer


def _in_warning(no: int, lines: list[str]) -> bool:
    """Line `no` (1-based) is a logged warning, or continues one (no record of its own starts on it)."""
    for k in range(no, max(no - MAX_CONTINUATION, 0), -1):
        line = lines[k - 1] if k - 1 < len(lines) else ""
        if _WARNING_LINE.search(line):
            return True
        if _RECORD_START.search(line) or not line.strip():
            return False
    return False


def _survived(m: Match, stop: str, lines: list[str]) -> bool:
    """The program went on after this finding: every line of it is (part of) a logged warning, and what
    stopped the program (an exception no rule explains) does not concern the GPU stack at all."""
    if not stop or _GPU_WORDS.search(stop) or any(p.search(stop) for p in m.rule.patterns):
        return False
    return bool(m.lines) and all(_in_warning(no, lines) for no, _ in m.lines)


def _cause(matches: list[Match], rules: RuleSet, stop: str, text: str) -> tuple[Optional[Match], bool]:
    """(the primary match or None, whether the best candidate was a warning the program survived)."""
    primary = _primary(matches, rules, stop)
    if primary is not None and _survived(primary, stop, text.split("\n")):
        return None, True  # not why it stopped: say unknown, list it as also found
    return primary, False


def _with_knowledge(f: Finding, text: str, kernels: Optional[KernelRows]) -> Finding:
    """The primary finding, named by a kernels.yaml row when the log prints the facts the row needs
    (compute capability; the cuDNN or TensorFlow version): the row's words, fix and source first."""
    if kernels is None:
        return f
    named = explain(f.rule_id, kernels, read_facts(text))
    if named is None:
        return f
    return replace(f, cause=f"{named.cause} {f.cause}", fix=named.fix, source=named.source or f.source,
                   knowledge=named.ref)


def classify(text: str, rules: RuleSet, kernels: Optional[KernelRows] = None) -> Diagnosis:
    text = logtext.clean(text or "")
    got = _matches(text, rules)
    matches = got.matches
    stop, stopped_by = _stop_text(got.read)
    primary, survived = _cause(matches, rules, stop, text)
    harmless = [m for m in matches if m.rule.harmless]
    others = sorted((m for m in matches if not m.rule.harmless and m is not primary),
                    key=lambda m: (rules.layer_index(m.rule.layer), -m.rule.specificity))
    status = CAUSE
    advice: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    if primary is None:
        advice = layer_advice(rules)
        left = logtext.unexplained(text, got.explained())
        # Known noise alone is "nothing wrong". Noise before a failure no rule explains is not (issue 43):
        # neither a line that stopped the program nor any error-looking line may be left unexplained.
        status = HARMLESS_ONLY if harmless and not survived and not stopped_by and not left else UNKNOWN
    return Diagnosis(
        status=status,
        primary=_with_knowledge(_finding(primary), got.read, kernels) if primary else None,
        others=tuple(_finding(m) for m in others),
        harmless=tuple(_finding(m) for m in harmless),
        advice=advice,
        unexplained=left,
        stopped_by=stopped_by,
    )
