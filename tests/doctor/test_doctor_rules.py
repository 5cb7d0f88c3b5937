"""errors.yaml loads, every row is complete and sourced, and a broken file names file:line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfgpu_install.doctor.rules import FIX_KINDS, load_rules, parse_rules, render
from tfgpu_install.errors import BadInputError, ExitCode

GOOD = """\
layers:
  - id: driver
    title: NVIDIA driver
    check: nvidia-smi
rules:
  - id: a-rule
    layer: driver
    severity: error
    patterns: ['libfoo\\.so\\.(?P<major>\\d+)']
    cause: "libfoo {major} is missing"
    fix: "install libfoo {major}; echo ${HOME}"
    source: https://example.org/thread
"""


def test_packaged_errors_yaml_loads_and_is_complete() -> None:
    rs = load_rules()
    assert len(rs.rules) >= 40
    assert [layer.id for layer in rs.layers][:3] == ["driver", "toolkit", "libraries"]
    for r in rs.rules:
        assert r.source.startswith("https://"), r.id
        assert r.fix_kind in FIX_KINDS
        assert r.line > 0
        if not r.harmless:
            assert r.cause and r.fix
    harmless = {r.id for r in rs.rules if r.harmless}
    assert {"tensorrt-missing", "factory-registration", "numa-node", "onednn-notice"} <= harmless


def test_good_minimal_file_and_rendering() -> None:
    rs = parse_rules(GOOD, "x.yaml")
    r = rs.by_id("a-rule")
    assert r.specificity == 50 and not r.harmless
    # {name} placeholders are filled; shell ${VAR} is left alone.
    assert render(r.fix, {"major": "9"}) == "install libfoo 9; echo ${HOME}"


@pytest.mark.parametrize(
    "edit, message",
    [
        (("severity: error", "severity: fatal"), r"x\.yaml:8: rule 'a-rule': severity must be one of"),
        (("layer: driver\n    severity", "layer: gpu\n    severity"), r"x\.yaml:7: rule 'a-rule': unknown layer 'gpu'"),
        (("patterns: ['libfoo", "patterns: ['(libfoo"), r"x\.yaml:9: bad regex in `patterns`"),
        (("cause: \"libfoo {major}", "cause: \"libfoo {minor}"), r"x\.yaml:10: rule 'a-rule': `cause` uses \{minor\}"),
        (("source: https://example.org/thread", "source: example.org"),
         r"x\.yaml:12: rule 'a-rule': source must be an https"),
        (("    source: https://example.org/thread\n", "    source: https://e.org\n    colour: red\n"),
         r"x\.yaml:13: unknown field 'colour'"),
        (("    fix: \"install", "    yields_to: [nope]\n    fix: \"install"),
         r"x\.yaml:6: rule 'a-rule' yields_to unknown rule 'nope'"),
        (("  - id: a-rule", "  - id: A_Rule"), r"x\.yaml:6: rule id must be kebab-case"),
        (("    cause: \"libfoo {major} is missing\"\n", ""), r"x\.yaml:6: rule 'a-rule' lacks `cause`"),
    ],
)
def test_bad_rules_name_file_and_line(edit: tuple[str, str], message: str) -> None:
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(BadInputError) as exc:
        parse_rules(text, "x.yaml")
    assert re.search(message, exc.value.message), exc.value.message
    assert exc.value.code == ExitCode.BAD_INPUT


def test_duplicate_id_names_both_lines() -> None:
    rule = GOOD.split("rules:\n", 1)[1]
    with pytest.raises(BadInputError, match=r"x\.yaml:13: duplicate rule id 'a-rule' \(first at line 6\)"):
        parse_rules(GOOD + rule, "x.yaml")


def test_not_yaml_names_the_line() -> None:
    with pytest.raises(BadInputError, match=r"x\.yaml:\d+: not valid YAML"):
        parse_rules("layers: []\nrules:\n  - id: [unclosed\n", "x.yaml")


def test_missing_sections() -> None:
    with pytest.raises(BadInputError, match="`rules` must be a list"):
        parse_rules("layers: []\n", "x.yaml")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="cannot read"):
        load_rules(tmp_path / "missing.yaml")


def test_defaults_fill_a_group_a_later_line_lacks() -> None:
    """A pattern without the {major} group is refused unless the rule says what to write instead."""
    two = GOOD.replace("patterns: ['libfoo\\.so\\.(?P<major>\\d+)']",
                       "patterns: ['libfoo\\.so\\.(?P<major>\\d+)', 'note about libfoo']")
    assert two != GOOD
    with pytest.raises(BadInputError, match=r"`cause` uses \{major\} but pattern 'note about libfoo'"):
        parse_rules(two, "x.yaml")
    rs = parse_rules(two.replace("    source:", "    defaults: {major: '<major>'}\n    source:"), "x.yaml")
    from tfgpu_install.doctor.rules import match_rule

    m = match_rule(rs.by_id("a-rule"), "a note about libfoo\n")
    assert m is not None and m.render(m.rule.cause) == "libfoo <major> is missing"
    m = match_rule(rs.by_id("a-rule"), "libfoo.so.9\na note about libfoo\n")
    assert m is not None and m.render(m.rule.cause) == "libfoo 9 is missing"  # the headline's own value wins
    for bad in ("defaults: [major]", "defaults: {major: ''}"):
        with pytest.raises(BadInputError, match="defaults must map group names to words"):
            parse_rules(two.replace("    source:", f"    {bad}\n    source:"), "x.yaml")


def test_disclaims_only_on_a_harmless_rule() -> None:
    with pytest.raises(BadInputError, match="disclaims must be true or false, and true only for a harmless rule"):
        parse_rules(GOOD.replace("    source:", "    disclaims: true\n    source:"), "x.yaml")
    rs = parse_rules(GOOD.replace("    source:", "    harmless: true\n    disclaims: true\n    source:"), "x.yaml")
    assert rs.by_id("a-rule").disclaims
