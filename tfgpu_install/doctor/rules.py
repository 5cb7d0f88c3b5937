"""profiles/errors.yaml: load, validate (errors name file:line), and match rules against text.

The knowledge is data; this module only knows the schema (documented in the YAML's header).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.errors import BadInputError

SEVERITIES = ("error", "warning", "info")
FIX_KINDS = ("command", "remove", "install", "setting", "upgrade", "none")
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_RULE_KEYS = {
    "id", "layer", "severity", "harmless", "specificity", "patterns", "requires", "yields_to",
    "evidence", "cause", "fix", "fix_kind", "source", "defaults", "disclaims",
}
_REQUIRED = ("id", "layer", "severity", "patterns", "cause", "fix", "source")


@dataclass(frozen=True)
class Layer:
    id: str
    title: str
    check: str  # what to look at in this layer (the advice for logs we cannot classify)


@dataclass(frozen=True)
class Rule:
    id: str
    layer: str
    severity: str
    patterns: tuple["re.Pattern[str]", ...]
    cause: str
    fix: str
    source: str
    harmless: bool = False
    specificity: int = 50
    requires: tuple["re.Pattern[str]", ...] = ()
    yields_to: tuple[str, ...] = ()
    evidence: tuple["re.Pattern[str]", ...] = ()
    fix_kind: str = "command"
    line: int = 0  # where the rule starts in its file (for messages)
    # {name} -> words used when the pattern that matched has no such group: a later line that carries the
    # same evidence as the headline, without the headline's numbers ("the version is on the line above")
    defaults: tuple[tuple[str, str], ...] = ()
    disclaims: bool = False  # harmless: its lines say they are not a failure; no other rule may quote them


@dataclass(frozen=True)
class RuleSet:
    layers: tuple[Layer, ...]
    rules: tuple[Rule, ...]
    path: str = ""
    ptxas_min_cuda: dict[str, str] = field(default_factory=dict)  # compute capability -> CUDA release
    ptxas_source: str = ""

    def layer_index(self, layer_id: str) -> int:
        for i, layer in enumerate(self.layers):
            if layer.id == layer_id:
                return i
        return len(self.layers)

    def by_id(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)


@dataclass(frozen=True)
class Match:
    """One rule that matched a text: the values of its named groups and the lines that show it."""

    rule: Rule
    groups: dict[str, str] = field(default_factory=dict)
    lines: tuple[tuple[int, str], ...] = ()  # (1-based line number, line text)

    def render(self, template: str) -> str:
        return render(template, dict(self.rule.defaults) | self.groups)


# {name} placeholders; `${VAR}` (shell) is left alone so fixes can quote shell text as is.
_PLACEHOLDER = re.compile(r"(?<!\$)\{([a-z_][a-z0-9_]*)\}")


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def render(template: str, groups: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: groups.get(m.group(1), "?"), template)


def default_path(profiles: Optional[Path] = None) -> Path:
    """errors.yaml of `profiles` (TFGPU_PROFILES_DIR: a site's own knowledge dir) when it has one,
    else the packaged one (profiles/ is installed as tfgpu_install.profiles)."""
    if profiles is not None and (Path(profiles) / "errors.yaml").is_file():
        return Path(profiles) / "errors.yaml"
    from tfgpu_install.knowledge.load import profiles_dir

    return profiles_dir() / "errors.yaml"


def load_rules(path: Optional[Path] = None, profiles: Optional[Path] = None) -> RuleSet:
    """Load and validate errors.yaml (`path`, else default_path(profiles)).
    Raises BadInputError("<file>:<line>: <what>")."""
    p = Path(path) if path is not None else default_path(profiles)
    try:
        from tfgpu_install.guard.bounded import read_text

        text = read_text(str(p), "profile")  # capped: a rules file is user input (--rules FILE)
    except OSError as exc:
        raise BadInputError(f"{p}: cannot read: {exc.strerror}", hint="reinstall tfgpu-install") from exc
    return parse_rules(text, str(p))


def parse_rules(text: str, name: str = "errors.yaml") -> RuleSet:
    import yaml  # heavy: only on the doctor path

    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise BadInputError(f"{name}:{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(root, yaml.MappingNode):
        raise BadInputError(f"{name}:1: expected a mapping with `layers` and `rules`")
    top = {k.value: v for k, v in root.value}
    for key in ("layers", "rules"):
        if key not in top or not isinstance(top[key], yaml.SequenceNode):
            raise BadInputError(f"{name}:{root.start_mark.line + 1}: `{key}` must be a list")
    layers = tuple(_layer(node, name) for node in top["layers"].value)
    layer_ids = [layer.id for layer in layers]
    rules = tuple(_rule(node, name, layer_ids) for node in top["rules"].value)
    seen: dict[str, int] = {}
    for r in rules:
        if r.id in seen:
            raise BadInputError(f"{name}:{r.line}: duplicate rule id {r.id!r} (first at line {seen[r.id]})")
        seen[r.id] = r.line
    for r in rules:
        for other in r.yields_to:
            if other not in seen:
                raise BadInputError(f"{name}:{r.line}: rule {r.id!r} yields_to unknown rule {other!r}")
    ptxas, ptxas_source = _ptxas_table(top.get("ptxas_min_cuda"), name)
    return RuleSet(layers=layers, rules=rules, path=name, ptxas_min_cuda=ptxas, ptxas_source=ptxas_source)


def _ptxas_table(node: Any, name: str) -> tuple[dict[str, str], str]:
    if node is None:
        return {}, ""
    line = node.start_mark.line + 1
    d = _plain(node)
    archs = d.get("archs") if isinstance(d, dict) else None
    source = d.get("source") if isinstance(d, dict) else None
    if not isinstance(archs, dict) or not isinstance(source, str) or not source.startswith("https://"):
        raise BadInputError(f"{name}:{line}: ptxas_min_cuda needs `archs` (CC: CUDA) and an https `source`")
    for cc, cuda in archs.items():
        if not re.fullmatch(r"\d+\.\d+", str(cc)) or not re.fullmatch(r"\d+\.\d+", str(cuda)):
            raise BadInputError(f"{name}:{line}: ptxas_min_cuda: {cc!r}: {cuda!r} must be two versions X.Y")
    return {str(k): str(v) for k, v in archs.items()}, source


def _plain(node: Any) -> Any:
    import yaml

    return yaml.safe_load(yaml.serialize(node))


def _fields(node: Any, name: str, what: str) -> dict[str, tuple[Any, int]]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise BadInputError(f"{name}:{node.start_mark.line + 1}: each {what} must be a mapping")
    return {k.value: (_plain(v), v.start_mark.line + 1) for k, v in node.value}


def _layer(node: Any, name: str) -> Layer:
    f = _fields(node, name, "layer")
    line = node.start_mark.line + 1
    for key in ("id", "title", "check"):
        if not isinstance(f.get(key, (None,))[0], str):
            raise BadInputError(f"{name}:{line}: layer needs a text `{key}`")
    return Layer(id=f["id"][0], title=f["title"][0], check=f["check"][0])


def _compile(value: Any, key: str, name: str, line: int) -> tuple["re.Pattern[str]", ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadInputError(f"{name}:{line}: `{key}` must be a list of regexes")
    out = []
    for v in value:
        try:
            out.append(re.compile(v, re.MULTILINE))
        except re.error as exc:
            raise BadInputError(f"{name}:{line}: bad regex in `{key}`: {v!r}: {exc}") from exc
    return tuple(out)


def _options(f: dict[str, tuple[Any, int]], name: str, rid: str, line: int) -> tuple[bool, int, str]:
    """harmless, specificity and fix_kind, each checked (with its default when absent)."""
    harmless, hl = f.get("harmless", (False, line))
    if not isinstance(harmless, bool):
        raise BadInputError(f"{name}:{hl}: rule {rid!r}: harmless must be true or false")
    spec, spl = f.get("specificity", (50, line))
    if not isinstance(spec, int) or isinstance(spec, bool) or not 0 <= spec <= 100:
        raise BadInputError(f"{name}:{spl}: rule {rid!r}: specificity must be an integer 0-100")
    fix_kind, fkl = f.get("fix_kind", ("command", line))
    if fix_kind not in FIX_KINDS:
        raise BadInputError(f"{name}:{fkl}: rule {rid!r}: fix_kind must be one of {FIX_KINDS}")
    return harmless, spec, str(fix_kind)


def _defaults(value: object, line: int, name: str, rid: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()):
        raise BadInputError(f"{name}:{line}: rule {rid!r}: defaults must map group names to words")
    return tuple(sorted(value.items()))


def _check_placeholders(f: dict[str, tuple[Any, int]], patterns: tuple[re.Pattern[str], ...], name: str, rid: str,
                        defaults: tuple[tuple[str, str], ...]) -> None:
    """Every {placeholder} must be a named group of every pattern (or have a default), so a rendered cause
    never says "?"."""
    for key in ("cause", "fix"):
        names = placeholders(f[key][0]) - {k for k, _ in defaults}
        for pat in patterns:
            missing = names - set(pat.groupindex)
            if missing:
                raise BadInputError(
                    f"{name}:{f[key][1]}: rule {rid!r}: `{key}` uses {{{sorted(missing)[0]}}} "
                    f"but pattern {pat.pattern!r} has no such named group"
                )


def _rule(node: Any, name: str, layer_ids: list[str]) -> Rule:
    f = _fields(node, name, "rule")
    line = node.start_mark.line + 1
    unknown = sorted(set(f) - _RULE_KEYS)
    if unknown:
        raise BadInputError(f"{name}:{f[unknown[0]][1]}: unknown field {unknown[0]!r} (known: {sorted(_RULE_KEYS)})")
    for key in _REQUIRED:
        if key not in f:
            raise BadInputError(f"{name}:{line}: rule {f.get('id', ('?',))[0]!r} lacks `{key}`")
    rid, lid = f["id"]
    if not isinstance(rid, str) or not _ID.match(rid):
        raise BadInputError(f"{name}:{lid}: rule id must be kebab-case, got {rid!r}")
    layer, ll = f["layer"]
    if layer not in layer_ids:
        raise BadInputError(f"{name}:{ll}: rule {rid!r}: unknown layer {layer!r} (known: {', '.join(layer_ids)})")
    sev, sl = f["severity"]
    if sev not in SEVERITIES:
        raise BadInputError(f"{name}:{sl}: rule {rid!r}: severity must be one of {SEVERITIES}, got {sev!r}")
    harmless, spec, fix_kind = _options(f, name, rid, line)
    source, srl = f["source"]
    if not isinstance(source, str) or not source.startswith("https://"):
        raise BadInputError(f"{name}:{srl}: rule {rid!r}: source must be an https:// URL")
    for key in ("cause", "fix"):
        if not isinstance(f[key][0], str) or not f[key][0].strip():
            raise BadInputError(f"{name}:{f[key][1]}: rule {rid!r}: `{key}` must be text")
    patterns = _compile(f["patterns"][0], "patterns", name, f["patterns"][1])
    requires = _compile(f["requires"][0], "requires", name, f["requires"][1]) if "requires" in f else ()
    evidence = _compile(f["evidence"][0], "evidence", name, f["evidence"][1]) if "evidence" in f else ()
    yields, yl = f.get("yields_to", ([], line))
    if not isinstance(yields, list) or not all(isinstance(y, str) for y in yields):
        raise BadInputError(f"{name}:{yl}: rule {rid!r}: yields_to must be a list of rule ids")
    dvalue, dline = f.get("defaults", ({}, line))
    defaults = _defaults(dvalue, dline, name, rid)
    _check_placeholders(f, patterns, name, rid, defaults)
    disclaims, dl = f.get("disclaims", (False, line))
    if not isinstance(disclaims, bool) or disclaims and not harmless:
        raise BadInputError(f"{name}:{dl}: rule {rid!r}: disclaims must be true or false, and true only "
                            "for a harmless rule")
    return Rule(
        id=rid, layer=layer, severity=sev, patterns=patterns, cause=f["cause"][0].strip(),
        fix=f["fix"][0].strip(), source=source, harmless=harmless, specificity=spec, requires=requires,
        yields_to=tuple(yields), evidence=evidence, fix_kind=fix_kind, line=line, defaults=defaults,
        disclaims=disclaims,
    )


class LineIndex:
    """Line numbers of positions in one text, built once per text: counting newlines from the
    start for every match made `doctor --log` quadratic (a 50 MB log took minutes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts: Optional[list[int]] = None

    def line_at(self, pos: int) -> tuple[int, str]:
        if self._starts is None:
            self._starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        no = bisect_right(self._starts, pos)
        start = self._starts[no - 1]
        end = self.text.find("\n", pos)
        return no, self.text[start : end if end != -1 else len(self.text)].strip()


MAX_EVIDENCE = 6


_META = set(".^$*+?{}[]()|")
_QUANT = set("*+?{")
_ESCAPED_LITERAL = set(".^$*+?{}[]()|\\/-'\"`<>:#%&=!,;@~ ")


def _token(src: str, i: int) -> tuple[int, Optional[str], int]:
    """One pattern token at i: (length, its literal character or None, depth change)."""
    ch = src[i]
    if ch == "\\" and i + 1 < len(src):
        return 2, (src[i + 1] if src[i + 1] in _ESCAPED_LITERAL else None), 0
    if ch == "[":
        close = src.find("]", i + 2)
        return (close - i + 1 if close != -1 else len(src) - i), None, 0
    if ch in "()":
        return 1, None, 1 if ch == "(" else -1
    return 1, (None if ch in _META else ch), 0


def required_literal(pat: "re.Pattern[str]") -> str:
    """The longest plain text every match of pat must contain ("" when none is certain).

    `literal in text` runs at memory speed while a regex scan of a 50 MB log costs ~50 ms per
    pattern, and most rules' texts are absent from any one log: this skips those scans.
    A small reading of the pattern's own text (no private `re` internals): only runs of literal
    characters outside any group and class count (a top-level `|` means none); a quantified character ends a run.
    """
    src = pat.pattern
    if pat.flags & (re.IGNORECASE | re.VERBOSE):
        return ""
    best, run, i, depth = "", "", 0, 0
    while i < len(src):
        if src[i] == "|" and depth == 0:
            return ""  # a top-level alternative: no text is certain
        step, lit, change = _token(src, i)
        depth += change
        i += step
        if lit is not None and depth == 0 and not (i < len(src) and src[i] in _QUANT):
            run += lit
            continue
        best, run = max(best, run, key=len), ""
    return max(best, run, key=len)


def _may_match(pat: "re.Pattern[str]", text: str) -> bool:
    lit = _literals.get(pat)
    if lit is None:
        lit = _literals[pat] = required_literal(pat)
    return lit in text


_literals: dict["re.Pattern[str]", str] = {}


def _first_lines(pat: "re.Pattern[str]", index: LineIndex, lines: dict[int, str], limit: int,
                 groups: Optional[dict[str, str]] = None) -> None:
    """Add the lines of pat's first matches to `lines`; stop once `limit` lines are held."""
    if not _may_match(pat, index.text):
        return
    for m in pat.finditer(index.text):
        if groups is not None and not groups and m.groupdict():
            groups.update({k: v for k, v in m.groupdict().items() if v is not None})
        no, line = index.line_at(m.start())
        lines.setdefault(no, line)
        if len(lines) >= limit:
            return


def match_rule(rule: Rule, text: str, index: Optional[LineIndex] = None) -> Optional[Match]:
    """The rule's match on text, or None. Groups come from the first pattern that matches."""
    if not any(_may_match(pat, text) for pat in rule.patterns):
        return None  # cheap: none of the rule's texts is in the log
    if not all(_may_match(req, text) and req.search(text) for req in rule.requires):
        return None
    index = index if index is not None and index.text is text else LineIndex(text)
    groups: dict[str, str] = {}
    lines: dict[int, str] = {}
    for pat in rule.patterns:
        _first_lines(pat, index, lines, MAX_EVIDENCE, groups)
    if not lines:
        return None
    for pat in rule.evidence:
        # Only the earliest MAX_EVIDENCE + 2 lines are kept: later matches of one pattern cannot be among them.
        _first_lines(pat, index, lines, len(lines) + MAX_EVIDENCE + 2)
    return Match(rule=rule, groups=groups, lines=tuple(sorted(lines.items())[: MAX_EVIDENCE + 2]))


def match_all(rules: RuleSet, text: str) -> list[Match]:
    index = LineIndex(text)
    out = []
    for rule in rules.rules:
        m = match_rule(rule, text, index)
        if m is not None:
            out.append(m)
    return out
