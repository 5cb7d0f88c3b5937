"""One line-tracking YAML reader (guard/yamltree.py) for the snapshots and the knowledge files:
the same lines for the same text, the same hostile input refused, each reader's own wording."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfgpu_install.errors import BadInputError
from tfgpu_install.guard import yamltree
from tfgpu_install.knowledge.yaml_reader import LDict, LList, read_yaml
from tfgpu_install.snapshot import reader

TEXT = """\
# a comment
top:
  a: 1
  b: "two"
  c: [x, y]
  d:
    - e: 2024-03-08
      f: null
"""
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{n}: &{n} [{','.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def test_both_readers_see_the_same_lines(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(TEXT)
    k = read_yaml(path, "k.yaml")
    s = reader.parse(TEXT, "s.yaml")
    assert isinstance(k, LDict) and isinstance(k["top"], LDict) and isinstance(k["top"]["c"], LList)
    top = s.value["top"]
    assert k["top"].line == top.line == 3 and k.key_lines["top"] == 2
    assert k["top"].key_lines == {"a": 3, "b": 4, "c": 5, "d": 6}
    assert [top.value[key].line for key in "abcd"] == [3, 4, 5, 7]
    assert k["top"]["d"].item_lines == [n.line for n in top.value["d"].value] == [7]
    assert k["top"]["a"] == top.value["a"].value == 1 and k["top"]["b"] == "two"
    assert k["top"]["d"][0]["e"] == "2024-03-08"  # a timestamp stays the text written


def test_a_knowledge_file_cannot_expand_a_billion_laughs(tmp_path: Path) -> None:
    """A site overlay of 10 lines expanded to 9^9 nodes in PyYAML's loader; refused at the anchor now."""
    path = tmp_path / "matrix.yaml"
    path.write_text(LAUGHS)
    with pytest.raises(BadInputError) as info:
        read_yaml(path, "matrix.yaml")
    assert info.value.message.startswith("matrix.yaml:1: malformed YAML: YAML anchor &a: anchors are not allowed")
    path.write_text('a: ["lol", "lol"]\n')  # the control: the same data written out loads
    assert read_yaml(path, "matrix.yaml") == {"a": ["lol", "lol"]}


@pytest.mark.parametrize("text, what", [
    ("a: !!python/object:os.system x\n", "YAML tag tag:yaml.org,2002:python/object:os.system"),
    ("a: 1\na: 2\n", None),  # a duplicate is remembered for the schema to refuse, not dropped
    ("a: [\n", "malformed YAML"),
])
def test_knowledge_and_snapshot_refuse_the_same_input(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(text)
    if what is None:
        assert read_yaml(path, "k.yaml").dup == ("a", 2)
        assert reader.parse(text, "s.yaml").value.duplicate == ("a", 2)
        return
    with pytest.raises(BadInputError) as k:
        read_yaml(path, "k.yaml")
    with pytest.raises(BadInputError) as s:
        reader.parse(text, "s.yaml")
    assert k.value.message.startswith("k.yaml:") and s.value.message.startswith("s.yaml:")
    assert what.replace("malformed YAML", "") in k.value.message and what.split(":")[0] in k.value.message


def test_the_bounds_are_the_readers_own() -> None:
    deep = "a: " + "[" * 30 + "]" * 30 + "\n"
    with pytest.raises(yamltree.Refused, match="nested more than 24"):
        yamltree.parse(deep, "a snapshot", reader.LIMITS)
    assert yamltree.parse("a: " + "[" * 20 + "]" * 20 + "\n", "a snapshot", reader.LIMITS) is not None
