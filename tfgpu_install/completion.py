"""Shell completion from the parser itself, through argcomplete (bash, zsh, fish).

`tfgpu-install completion SHELL` prints argcomplete's own script for the shell (app/completion.py). On
each TAB that script runs `tfgpu-install` with argcomplete's variables set (_ARGCOMPLETE, COMP_LINE,
COMP_POINT); cli.main sees them and answers from the same parser `--help` shows (build_parser), so a new
command, action or flag completes with no table to keep. Values come from completers (VALUES: one row per argument):
profile names, `--tensorflow` release lines from the knowledge tables, the envs this tool made, stored
snapshot ids; a path argument falls back to file names.

The README's implied install (`tfgpu-install --profile stable` is `tfgpu-install install --profile
stable`) completes too: a command line whose first word after the global flags is one of install's
flags is completed as install's (implied_install).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

if TYPE_CHECKING:
    import argparse

    from tfgpu_install.context import Context

GLOBAL_FLAGS = ("--json", "--debug")


def implied_install(words: Sequence[str], prefix: str, top_options: Iterable[str],
                    commands: Iterable[str]) -> list[str]:
    """The words argparse should complete: `words` (the program's name first, the word being completed
    left out) with `install` put where the implied install begins: before the first word after the
    global flags that is a flag of install's rather than a command, or at the end when the word being
    completed is such a flag (`tfgpu-install --prof<TAB>`: no top-level option starts so)."""
    words = list(words)
    names = set(commands)
    for i, word in enumerate(words[1:], start=1):
        if word in GLOBAL_FLAGS:
            continue
        if word in names or not word.startswith("-") or word in ("-h", "--help", "--version"):
            return words
        return words[:i] + ["install"] + words[i:]
    if prefix.startswith("-") and not any(o.startswith(prefix) for o in top_options):
        return words + ["install"]
    return words


# --- the values -----------------------------------------------------------------------------------

Completer = Callable[..., list[str]]


def _profiles(ctx: "Context") -> Completer:
    def complete(prefix: str = "", **_: Any) -> list[str]:
        from tfgpu_install.knowledge.model import BUILTIN_POLICIES

        found = sorted(BUILTIN_POLICIES)
        return found + _files(prefix, (".yaml", ".yml")) if ("/" in prefix or prefix.startswith(".")) else found
    return complete


def _tensorflow(ctx: "Context") -> Completer:
    def complete(**_: Any) -> list[str]:
        from tfgpu_install.knowledge.load import knowledge_dir, load_knowledge

        versions = {r.tensorflow for r in load_knowledge(knowledge_dir(ctx), cache_dir=ctx.cache_dir).releases}
        lines = {".".join(v.split(".")[:2]) for v in versions}
        return sorted(lines | versions, key=_version_key, reverse=True)
    return complete


def _envs(ctx: "Context") -> Completer:
    def complete(prefix: str = "", **_: Any) -> list[str]:
        from tfgpu_install.env.registry import default_env, live_envs

        known = [str(p) for p in ([default_env(ctx)] + live_envs(ctx)) if p is not None]
        home = str(ctx.home)
        if prefix.startswith("~"):  # as typed: ~/envs/tf for an env under the home dir
            known = ["~" + p[len(home):] for p in known if p == home or p.startswith(home + "/")]
        return list(dict.fromkeys(known)) + _dirs(prefix)
    return complete


def _snapshots(ctx: "Context", files: bool) -> Completer:
    def complete(prefix: str = "", **_: Any) -> list[str]:
        from tfgpu_install.snapshot.model import store_dir

        ids = sorted((p.stem for p in store_dir(ctx.state_dir).glob("*.yaml")), reverse=True)
        return ids + (_files(prefix, (".yaml", ".yml")) if files and ("/" in prefix or prefix.startswith(".")) else [])
    return complete


def _directories(ctx: "Context") -> Completer:
    def complete(prefix: str = "", **_: Any) -> list[str]:
        return _dirs(prefix)
    return complete


def _files(prefix: str, suffixes: Sequence[str]) -> list[str]:
    """Files (with these suffixes) and directories under the prefix's directory, as typed."""
    return [p for p in _listing(prefix) if p.endswith("/") or p.endswith(tuple(suffixes))]


def _dirs(prefix: str) -> list[str]:
    return [p for p in _listing(prefix) if p.endswith("/")]


def _listing(prefix: str) -> list[str]:
    head = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
    where = Path(os.path.expanduser(head or "."))
    try:
        entries = sorted(where.iterdir())
    except OSError:
        return []
    return [head + e.name + ("/" if e.is_dir() else "") for e in entries if not e.name.startswith(".")
            or prefix.rsplit("/", 1)[-1].startswith(".")]


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in v.split("."))


# (command path, argument dest) -> its values. The command path is the words before the argument
# ("" the top, "snapshot show"); "*" matches any command.
VALUES: dict[tuple[str, str], Callable[["Context"], Completer]] = {
    ("*", "profile"): _profiles,
    ("*", "tensorflow"): _tensorflow,
    ("*", "env"): _envs,
    ("envs remove", "path"): _envs,
    ("envs default", "path"): _envs,
    ("rollback", "to"): lambda ctx: _snapshots(ctx, files=False),
    ("upgrade", "to"): _directories,
    ("snapshot show", "id"): lambda ctx: _snapshots(ctx, files=False),
    ("snapshot diff", "a"): lambda ctx: _snapshots(ctx, files=True),
    ("snapshot diff", "b"): lambda ctx: _snapshots(ctx, files=True),
    ("snapshot restore", "file"): lambda ctx: _snapshots(ctx, files=True),
    ("snapshot bundle", "file"): lambda ctx: _snapshots(ctx, files=True),
    ("snapshot image", "file"): lambda ctx: _snapshots(ctx, files=True),
    ("fleet restore", "snapshot"): lambda ctx: _snapshots(ctx, files=True),
    ("fleet install", "snapshot"): lambda ctx: _snapshots(ctx, files=True),
}


def attach(parser: "argparse.ArgumentParser", ctx: "Context", path: str = "") -> None:
    """Give each argument VALUES names its completer (argcomplete reads `action.completer`)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                attach(sub, ctx, f"{path} {name}".strip())
            continue
        make = VALUES.get((path, action.dest)) or VALUES.get(("*", action.dest))
        if make is not None:
            action.completer = make(ctx)  # type: ignore[attr-defined]


def answer(parser: "argparse.ArgumentParser", ctx: "Context", commands: Iterable[str],
           output_stream: Optional[Any] = None) -> None:
    """Answer the shell's completion request (argcomplete reads what it asks from the environment the
    shell set for this process), with the implied install and the values above."""
    from argcomplete.finders import CompletionFinder

    attach(parser, ctx)
    top = [o for a in parser._actions for o in a.option_strings]
    names = list(commands)

    class Finder(CompletionFinder):
        def _get_completions(self, comp_words: list[str], cword_prefix: str, cword_prequote: str,
                             last_wordbreak_pos: Optional[int]) -> list[str]:
            words = implied_install(comp_words, cword_prefix, top, names)
            return list(super()._get_completions(  # type: ignore[no-untyped-call]
                words, cword_prefix, cword_prequote, last_wordbreak_pos))

    # options only once a "-" is typed: `tfgpu-install <TAB>` offers the commands
    Finder()(parser, always_complete_options=False, exit_method=lambda code: None, output_stream=output_stream)
