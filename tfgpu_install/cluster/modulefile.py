"""A module file for an env on the shared path: Lmod (Lua) or environment-modules (Tcl), so users of the
cluster get it with `module load tfgpu/<type>`. Pure text; every path quoted for its language (a path with
a quote or a newline is refused: it cannot be written safely in both)."""

from __future__ import annotations

from pathlib import Path

FORMATS = ("lua", "tcl")


def _lua(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tcl(text: str) -> str:
    return "{" + text + "}"


def _check(path: Path) -> str:
    text = str(path)
    if any(c in text for c in '\n\r{}"\\$[]'):
        raise ValueError(f"{text!r}: a path a module file cannot carry safely")
    return text


def render(fmt: str, env: Path, what: str) -> str:
    """`what`: one line for `module help`/whatis (our own words: TF/CUDA/cuDNN and how it was verified)."""
    root = _check(env)
    about = " ".join(what.split()).replace('"', "'").replace("{", "(").replace("}", ")")
    if fmt == "lua":
        return "\n".join([
            "-- tfgpu-install cluster: the env on the shared path",
            f"whatis({_lua(about)})",
            f"setenv(\"VIRTUAL_ENV\", {_lua(root)})",
            f"prepend_path(\"PATH\", {_lua(root + '/bin')})",
            "",
        ])
    return "\n".join([
        "#%Module1.0",
        "# tfgpu-install cluster: the env on the shared path",
        f"module-whatis {_tcl(about)}",
        f"setenv VIRTUAL_ENV {_tcl(root)}",
        f"prepend-path PATH {_tcl(root + '/bin')}",
        "",
    ])


def file_name(fmt: str, type_name: str) -> str:
    return f"{type_name}.lua" if fmt == "lua" else type_name
