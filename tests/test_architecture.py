"""The package's shape, checked by walking its own source (so a clone checks itself):
no import circles, no core module importing the command line, no private name used across
packages, and no import against the declared layer order (every import counts: at the top,
inside a function, under TYPE_CHECKING).

Run as a script for the report: `python3 tests/test_architecture.py`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

ROOT = Path(__file__).resolve().parent.parent
NAME = "tfgpu_install"

# The layer order, top to bottom (design.md: commands -> app -> (plan, engine, snapshot, doctor,
# fleet) -> (steps, resolver) -> (knowledge, facts, fetch) -> (runner, context, errors)), one
# row per layer. A unit (a subpackage, or a module directly in tfgpu_install/) imports only
# units in rows below its own; units in one row do not import each other. `<root>` is
# tfgpu_install/__init__.py (the version).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("entry",),
    ("cli",),
    ("commands",),
    ("completion", "app"),
    ("cluster",),  # Slurm / Kubernetes by node type: uses fleet's wheel and --same decisions
    ("fleet", "doctor"),
    ("plan",),  # resolution or snapshot -> steps
    ("snapshot",),  # the document, its store, and the step that records it
    ("engine",),  # runs steps and journals them
    ("steps",),
    ("resolver", "conda"),
    ("verify", "facts", "fetch"),
    ("knowledge", "env"),  # env: the environment's own room (layout, journal, integrity, tools)
    ("console",),
    ("report", "guard", "files", "context"),
    ("runner", "dirs", "transfer_rate"),  # transfer_rate: a pure estimate of bytes per second
    ("errors",),
    ("<root>",),
)
FACE = ("__main__", "entry", "cli", "commands", "completion")  # the command line
# Documents are typed inside the code (design.md): `dict[str, Any]` is left only at the edges (a
# json.loads result before it is validated). Every one counts, also through an alias
# (`JSON = dict[str, Any]` is the same thing); `Mapping[str, Any]` may not grow either (a dict
# renamed into one is not typed).
ANY_DICTS_MAX = 44  # #36 asks for at most 60; lowered to the count each time it falls
ANY_MAPPINGS_MAX = 30


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (the nearest module that exists)
    name: Optional[str]  # the name taken from it (`from target import name`), if any
    line: int


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in sorted((root / NAME).rglob("*.py")):
        dotted = ".".join(path.relative_to(root).with_suffix("").parts)
        out[dotted.removesuffix(".__init__")] = path
    return out


def unit(module: str) -> str:
    """The layer unit of a module: tfgpu_install.steps.cudnn.place -> steps."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def _existing(dotted: str, mods: dict[str, Path]) -> Optional[str]:
    while dotted and dotted not in mods:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def _imports_of(module: str, path: Path, mods: dict[str, Path]) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), str(path))
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _existing(alias.name, mods) if alias.name.startswith(NAME) else None
                if target:
                    yield Import(module, target, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            if not base.startswith(NAME):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in mods:  # `from package import module`
                    yield Import(module, full, None, node.lineno)
                else:
                    target = _existing(base, mods)
                    if target:
                        yield Import(module, target, alias.name, node.lineno)


def _module_aliases(path: Path, mods: dict[str, Path], module: str) -> Iterator[tuple[str, str, str, int]]:
    """`alias._name` where alias was bound by importing one of the package's modules."""
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in mods:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in mods:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and _private(node.attr)):
            yield module, bound[node.value.id], node.attr, node.lineno


@lru_cache(maxsize=1)
def graph() -> tuple[Import, ...]:
    mods = modules()
    return tuple(imp for m, p in mods.items() for imp in _imports_of(m, p, mods))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports() -> list[str]:
    """Names with a leading underscore (or modules named so) taken from another unit."""
    mods = modules()
    found = []
    for imp in graph():
        if unit(imp.source) == unit(imp.target):
            continue
        if (imp.name and _private(imp.name)) or any(_private(p) for p in imp.target.split(".")):
            found.append(f"{imp.source}:{imp.line} takes {imp.target}.{imp.name or ''}")
    for m, p in mods.items():
        for source, target, attr, line in _module_aliases(p, mods, m):
            if unit(source) != unit(target):
                found.append(f"{source}:{line} uses {target}.{attr}")
    return sorted(set(found))


def _rank(u: str) -> int:
    for i, row in enumerate(LAYERS):
        if u in row:
            return i
    raise KeyError(u)


def unplaced() -> list[str]:
    return sorted({unit(m) for m in modules()} - {u for row in LAYERS for u in row})


def arrows_against_layers() -> list[str]:
    """Imports from a unit to one in its own row or above it."""
    found = []
    for imp in graph():
        a, b = unit(imp.source), unit(imp.target)
        if a != b and _rank(b) <= _rank(a):
            found.append(f"{a} -> {b}: {imp.source}:{imp.line} imports {imp.target}")
    return sorted(set(found))


def core_to_command() -> list[str]:
    return sorted({f"{imp.source}:{imp.line} imports {imp.target}" for imp in graph()
                   if unit(imp.source) not in FACE and unit(imp.target) in ("commands", "cli")})


def circles() -> list[list[str]]:
    """Import circles among modules (a package's __init__ re-exporting its children is none)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for imp in graph():
        own_child = mods[imp.source].name == "__init__.py" and imp.target.startswith(imp.source + ".")
        if imp.target != imp.source and not own_child:
            edges[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return comps


def _is_any_dict(node: ast.AST, heads: tuple[str, ...]) -> bool:
    """`dict[str, Any]` (or `Dict`, `typing.Dict`, a string annotation holding one) for heads ("dict", "Dict")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except (SyntaxError, ValueError):  # a NUL: ValueError on Debian bookworm's 3.11.2, SyntaxError on 3.11.7
            return False
    if not isinstance(node, ast.Subscript):
        return False
    head = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", None)
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else []
    names = [a.id if isinstance(a, ast.Name) else getattr(a, "attr", None) for a in args]
    return head in heads and names == ["str", "Any"]


def any_dicts(root: Path = ROOT, heads: tuple[str, ...] = ("dict", "Dict")) -> list[str]:
    """Every `dict[str, Any]` in the package's source (annotations, casts, alias definitions), and every
    use of a name bound to one at a module's top (an alias, under whatever name it is imported as)."""
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in modules(root).items()}
    aliases = {t.id for tree in trees.values() for n in tree.body
               if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None and _is_any_dict(n.value, heads)
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    found = []
    for m, tree in trees.items():
        local = set(aliases) | {a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                                for a in n.names if a.asname and a.name in aliases}
        for n in ast.walk(tree):
            if _is_any_dict(n, heads) or (isinstance(n, ast.Name) and n.id in local and isinstance(n.ctx, ast.Load)):
                found.append(f"{m}:{getattr(n, 'lineno', 0)}")
    return found


def any_mappings(root: Path = ROOT) -> list[str]:
    return any_dicts(root, ("Mapping", "MutableMapping"))


# --- the tests ------------------------------------------------------------------------------


def test_every_unit_has_a_layer() -> None:
    assert unplaced() == []


def test_no_import_circles() -> None:
    assert circles() == []


def test_no_core_module_imports_the_command_line() -> None:
    assert core_to_command() == []


def test_no_private_name_crosses_a_package() -> None:
    assert private_imports() == []


def test_no_import_runs_against_the_layer_order() -> None:
    assert arrows_against_layers() == []


def test_the_command_line_knows_no_command_by_name() -> None:
    """cli.py dispatches through the command table (commands/__init__.py): no command's own logic,
    no `if command == "install"` (the no-op fast path is the table's `early` hook)."""
    from tfgpu_install.commands import COMMANDS

    tree = ast.parse((ROOT / NAME / "cli.py").read_text())
    named = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in COMMANDS})
    assert named == []


def test_documents_are_typed_inside_the_code() -> None:
    """At most ANY_DICTS_MAX `dict[str, Any]` in the package (aliases counted), and none in the
    snapshot's model or the resolver's output."""
    assert ANY_DICTS_MAX <= 60  # the ceiling only falls (#36)
    found = any_dicts()
    assert len(found) <= ANY_DICTS_MAX, f"{len(found)} dict[str, Any] (at most {ANY_DICTS_MAX}): type the document"
    typed = (f"{NAME}.snapshot.model", f"{NAME}.snapshot.document", f"{NAME}.resolver.")  # the snapshot, the resolution
    assert [f for f in found if f.startswith(typed)] == []
    assert len(any_mappings()) <= ANY_MAPPINGS_MAX


# One shape per command (#36 items 2, 3): app/ returns data, commands/ renders it. The app modules that
# still built output (report's blocks or Result) were listed here and the list only shrank: it is empty now.
OUTPUT_TYPES = frozenset({"Block", "Heading", "Text", "Table", "Bullets", "Result", "table"})
APP_BUILDS_OUTPUT: frozenset[str] = frozenset()  # none left (#36 item 3): none may build output again


def output_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """app module -> the output types it imports from report (anywhere in the module)."""
    out: dict[str, set[str]] = {}
    for path in sorted((root / NAME / "app").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == f"{NAME}.report":
                names = {a.name for a in node.names} & OUTPUT_TYPES
                if names:
                    out.setdefault(path.stem, set()).update(names)
    return out


def test_app_returns_data_not_output() -> None:
    """A converted app module may not build output again, and the list of those that do only shrinks."""
    found = output_imports()
    assert sorted(set(found) - APP_BUILDS_OUTPUT) == [], "app/ returns data: render it in commands/"
    assert sorted(APP_BUILDS_OUTPUT - set(found)) == [], "converted: take it out of APP_BUILDS_OUTPUT"


def test_the_output_check_sees_an_import(tmp_path: Path) -> None:
    (tmp_path / NAME / "app").mkdir(parents=True)
    (tmp_path / NAME / "app" / "a.py").write_text("def f():\n    from tfgpu_install.report import Text, human_bytes\n")
    (tmp_path / NAME / "app" / "b.py").write_text("from tfgpu_install.report import human_bytes\n")
    assert output_imports(tmp_path) == {"a": {"Text"}}


# Each command module (the command table's, and an early answer's) calls into app/: the work is an app
# function's, the command parses and renders (design.md: commands/ -> app/).
def app_functions(module: str, root: Path = ROOT) -> set[str]:
    """The functions an app module defines at its top (`tfgpu_install.app.x` -> {"x", ...})."""
    path = root / Path(*module.split(".")).with_suffix(".py")
    if not path.is_file():
        return set()
    return {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}


def calls_into_app(path: Path, root: Path = ROOT) -> bool:
    """Whether the module calls a function of an app module: `from tfgpu_install.app.x import f` then `f(...)`,
    or `from tfgpu_install.app import x` then `x.f(...)` (a request's class or a constant is not a call into
    the app)."""
    tree = ast.parse(path.read_text())
    funcs: set[str] = set()
    mods: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(f"{NAME}.app")):
            continue
        for alias in node.names:
            sub = f"{node.module}.{alias.name}"
            if (root / Path(*sub.split("."))).with_suffix(".py").is_file():
                mods[alias.asname or alias.name] = app_functions(sub, root)
            elif alias.name in app_functions(node.module, root):
                funcs.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in funcs:
                return True
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in mods.get(f.value.id, ()):
                return True
    return False


def commands_without_app(root: Path = ROOT) -> list[str]:
    from tfgpu_install.commands import COMMANDS

    names = {c.module for c in COMMANDS.values()} | {c.early for c in COMMANDS.values() if c.early}
    return sorted(n for n in names if not calls_into_app(root / NAME / "commands" / f"{n}.py", root))


def test_every_command_calls_into_app() -> None:
    assert commands_without_app() == [], "give the command an app function that returns data; render it here"


def test_the_app_call_check_sees_a_call(tmp_path: Path) -> None:
    (tmp_path / NAME / "app").mkdir(parents=True)
    (tmp_path / NAME / "app" / "thing.py").write_text("class ThingRequest: ...\nLIMIT = 3\ndef thing(r): ...\n")
    cmd = tmp_path / "cmd.py"
    cases = {
        "from tfgpu_install.app.thing import thing, ThingRequest\ndef run(): return thing(ThingRequest())\n": True,
        "from tfgpu_install.app import thing as t\ndef run(): return t.thing(t.ThingRequest())\n": True,
        "from tfgpu_install.app.thing import ThingRequest, LIMIT\ndef run(): return ThingRequest(), LIMIT\n": False,
        "from tfgpu_install.app.thing import thing\ndef run(): return thing\n": False,
    }
    for source, calls in cases.items():
        cmd.write_text(source)
        assert calls_into_app(cmd, tmp_path) is calls, source


def test_the_any_dict_count_sees_each_form(tmp_path: Path) -> None:
    """Each spelling and an alias's every use counts (a count that missed them could be met by renaming)."""
    (tmp_path / NAME).mkdir()
    (tmp_path / NAME / "__init__.py").write_text("")
    (tmp_path / NAME / "a.py").write_text(
        "import typing\nfrom typing import Any, Dict\nJSON = dict[str, Any]\n"
        "def f(x: Dict[str, Any], y: 'dict[str, Any]') -> typing.Dict[str, Any]: ...\n"
        "def g(z: JSON) -> dict[str, int]: ...\n")
    (tmp_path / NAME / "b.py").write_text("from .a import JSON as Doc\ndef h(d: Doc) -> Doc: ...\n")
    assert len(any_dicts(tmp_path)) == 7  # the alias's definition, 3 spellings, its use in a.py and 2 in b.py


def test_the_checker_sees_what_it_looks_for(tmp_path: Path) -> None:
    """A seeded package with one of each fault: the walk finds each, so a silent pass means
    none, not a blind checker."""
    pkg = tmp_path / NAME
    for sub in ("steps", "snapshot", "commands"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "steps" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tfgpu_install.snapshot.b import Thing\n"
        "def f():\n    from ..snapshot import b\n    return b._hidden\n")
    (pkg / "snapshot" / "b.py").write_text(
        "from tfgpu_install.steps.a import f\nfrom tfgpu_install.commands.c import _g\n")
    (pkg / "commands" / "c.py").write_text("def _g(): pass\n")
    mods = modules(tmp_path)
    imps = [imp for m, p in mods.items() for imp in _imports_of(m, p, mods)]
    pairs = {(unit(i.source), unit(i.target), i.name) for i in imps}
    assert ("steps", "snapshot", "Thing") in pairs  # under TYPE_CHECKING
    assert ("steps", "snapshot", None) in pairs  # relative, inside a function
    assert ("snapshot", "commands", "_g") in pairs
    uses = [u for m, p in mods.items() for u in _module_aliases(p, mods, m)]
    assert uses == [(f"{NAME}.steps.a", f"{NAME}.snapshot.b", "_hidden", 6)]


def report() -> str:
    lines = []
    for title, found in (("unplaced units", unplaced()), ("private cross-package", private_imports()),
                         ("arrows against the layers", arrows_against_layers()),
                         ("core -> command", core_to_command()),
                         ("circles", [", ".join(c) for c in circles()])):
        lines.append(f"{title}: {len(found)}")
        lines += [f"  {f}" for f in found]
    lines.append(f"dict[str, Any]: {len(any_dicts())} (at most {ANY_DICTS_MAX}); "
                 f"Mapping[str, Any]: {len(any_mappings())} (at most {ANY_MAPPINGS_MAX})")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
