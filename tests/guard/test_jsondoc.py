"""guard/jsondoc.py: fields of a JSON document the tool wrote and reads back (a journal's undo record)
are taken only when they have the type the reader expects; anything else is the default."""

from __future__ import annotations

import json

from tfgpu_install.guard.jsondoc import JSONObject, flag, integer, items, obj, objects, text, texts


def test_each_reader_takes_its_type_and_nothing_else() -> None:
    doc: JSONObject = json.loads('{"path": "/env", "n": 3, "on": 1, "list": ["a", 2, "b"], "map": {"k": "v"},'
                                 '"maps": [{"a": 1}, "x", {"b": 2}], "bad": true}')
    assert text(doc, "path") == "/env" and integer(doc, "n") == 3 and flag(doc, "on") is True  # sane control
    assert texts(doc, "list") == ["a", "b"] and obj(doc, "map") == {"k": "v"} and objects(doc, "maps") == [
        {"a": 1}, {"b": 2}]
    # A field of another type, or none at all: the default, never a TypeError in an undo.
    assert text(doc, "n") is None and text(doc, "gone") is None
    assert integer(doc, "bad") is None and integer(doc, "path") is None  # true is not 1 here
    assert items(doc, "map") == [] and obj(doc, "list") == {} and flag(doc, "gone") is False

