"""JSON documents this tool wrote and reads back (the journal's undo records, its own state files),
typed as what json.loads gives: a JSON value. A reader takes a field only when it has the type it
expects (`text`, `flag`, `items` ...): a damaged or older document gives the default, never a
TypeError halfway through an undo.

`JSONValue` is what json.loads returns and json.dumps takes, recursively; `dict[str, Any]` said
nothing about it (every use unchecked), this says what may be there and makes each reader check.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

JSONValue = Union[None, bool, int, float, str, Sequence["JSONValue"], Mapping[str, "JSONValue"]]
JSONObject = dict[str, JSONValue]  # one document, as json.loads gives it and json.dumps takes it


def text(doc: Mapping[str, JSONValue], key: str) -> Optional[str]:
    """doc[key] when it is a string, else None."""
    value = doc.get(key)
    return value if isinstance(value, str) else None


def flag(doc: Mapping[str, JSONValue], key: str) -> bool:
    """doc[key] taken as true or false (absent: false)."""
    return bool(doc.get(key))


def integer(doc: Mapping[str, JSONValue], key: str) -> Optional[int]:
    value = doc.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def items(doc: Mapping[str, JSONValue], key: str) -> Sequence[JSONValue]:
    """doc[key] when it is a list, else []."""
    value = doc.get(key)
    return value if isinstance(value, list) else []


def texts(doc: Mapping[str, JSONValue], key: str) -> list[str]:
    """The strings of the list doc[key] (other items left out; absent: [])."""
    return [v for v in items(doc, key) if isinstance(v, str)]


def obj(doc: Mapping[str, JSONValue], key: str) -> Mapping[str, JSONValue]:
    """doc[key] when it is an object, else {}."""
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def objects(doc: Mapping[str, JSONValue], key: str) -> list[Mapping[str, JSONValue]]:
    """The objects of the list doc[key]."""
    return [v for v in items(doc, key) if isinstance(v, dict)]
