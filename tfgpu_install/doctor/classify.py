"""Classify a pasted TensorFlow / pip / nvidia-smi / loader output: cause + fix. Pure.

How the primary cause is chosen (bottom-up, like the machine walk):
  1. harmless rules (known noise) and `info` rules (context) are never the cause;
  2. a rule whose `yields_to` names another rule that also matched is only a symptom;
  3. among the rest, the lowest layer wins (a broken driver explains a missing device, not
     the other way round); within a layer the more specific rule, then error over warning,
     then the earlier line.
Nothing matched -> "no known cause" and the layer-by-layer checks: never a confident guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from tfgpu_install.doctor.rules import Match, RuleSet, match_all

UNKNOWN = "unknown"  # nothing we know in the text
HARMLESS_ONLY = "harmless-only"  # only known noise: nothing wrong in this log
CAUSE = "cause"  # a cause was found

_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


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

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule_id, "layer": self.layer, "severity": self.severity,
            "harmless": self.harmless, "cause": self.cause, "fix": self.fix,
            "fix_kind": self.fix_kind, "source": self.source, "evidence": list(self.evidence),
        }


@dataclass(frozen=True)
class Diagnosis:
    status: str  # CAUSE | HARMLESS_ONLY | UNKNOWN
    primary: Optional[Finding]
    others: tuple[Finding, ...]  # other non-harmless findings (symptoms, context, warnings)
    harmless: tuple[Finding, ...]  # known noise met in the text: not to be blamed
    advice: tuple[str, ...]  # layer-by-layer checks, given when no cause was found

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.primary.evidence if self.primary else ()

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "primary": self.primary.to_json() if self.primary else None,
            "others": [f.to_json() for f in self.others],
            "harmless": [f.to_json() for f in self.harmless],
            "advice": list(self.advice),
        }


def _finding(m: Match) -> Finding:
    r = m.rule
    return Finding(
        rule_id=r.id, layer=r.layer, severity=r.severity, harmless=r.harmless,
        cause=m.render(r.cause), fix=m.render(r.fix), fix_kind=r.fix_kind, source=r.source,
        evidence=tuple(f"L{no}: {line}" for no, line in m.lines),
        first_line=m.lines[0][0] if m.lines else 0,
    )


def layer_advice(rules: RuleSet) -> tuple[str, ...]:
    return tuple(f"{i}. {layer.title}: {layer.check}" for i, layer in enumerate(rules.layers, 1))


def classify(text: str, rules: RuleSet) -> Diagnosis:
    matches = match_all(rules, text or "")
    matched_ids = {m.rule.id for m in matches}
    harmless = [m for m in matches if m.rule.harmless]
    real = [m for m in matches if not m.rule.harmless]
    candidates = [
        m for m in real
        if m.rule.severity != "info" and not any(y in matched_ids for y in m.rule.yields_to)
    ]
    candidates.sort(
        key=lambda m: (
            rules.layer_index(m.rule.layer),
            -m.rule.specificity,
            _SEVERITY_RANK[m.rule.severity],
            m.lines[0][0] if m.lines else 0,
        )
    )
    primary = candidates[0] if candidates else None
    others = [m for m in real if m is not primary]
    others.sort(key=lambda m: (rules.layer_index(m.rule.layer), -m.rule.specificity))
    if primary is not None:
        status = CAUSE
        advice: tuple[str, ...] = ()
    else:
        status = HARMLESS_ONLY if harmless else UNKNOWN
        advice = layer_advice(rules)
    return Diagnosis(
        status=status,
        primary=_finding(primary) if primary else None,
        others=tuple(_finding(m) for m in others),
        harmless=tuple(_finding(m) for m in harmless),
        advice=advice,
    )
