"""Shell completion scripts (bash, zsh, fish) from the command tree: pure text from plain data.

The tree is what argparse knows: each command's flags and sub-actions (`snapshot export`, ...),
read by tfgpu_install/commands/completion.py. The scripts complete command and action names and
flags; a flag's value falls back to the shell's file completion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PROG = "tfgpu-install"
_WORD = re.compile(r"^-{0,2}[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Node:
    """One level of the command line: its flags and the words that open a deeper level."""

    flags: tuple[str, ...] = ()
    subs: dict[str, "Node"] = field(default_factory=dict)
    help: str = ""


def _paths(node: Node, prefix: str = "") -> list[tuple[str, Node]]:
    """Every level by its path ("" the top, "/snapshot", "/snapshot/export"), depth first."""
    out = [(prefix, node)]
    for name, sub in node.subs.items():
        out += _paths(sub, f"{prefix}/{name}")
    return out


def _check(tree: Node) -> None:
    """Only plain words reach a script (they come from our own parser, but a script is code)."""
    for path, node in _paths(tree):
        for word in list(node.flags) + list(node.subs):
            if not _WORD.match(word):
                raise ValueError(f"not a plain word for a completion script: {word!r} (at {path or 'top'})")


def _one_line(text: str) -> str:
    return " ".join(text.replace("'", "").replace("\\", "").split())


def bash(tree: Node) -> str:
    _check(tree)
    words = [f'        "{p}") echo "{" ".join(list(n.subs) + list(n.flags))}" ;;' for p, n in _paths(tree)]
    subs = [f'        "{p}") echo "{" ".join(n.subs)}" ;;' for p, n in _paths(tree) if n.subs]
    return "\n".join([
        f"# {PROG} completion for bash: eval \"$({PROG} completion bash)\" (e.g. in ~/.bashrc)",
        "_tfgpu_install_words() {",
        '    case "$1" in',
        *words,
        "    esac",
        "}",
        "_tfgpu_install_subs() {",
        '    case "$1" in',
        *subs,
        "    esac",
        "}",
        "_tfgpu_install() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" path="" w i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        w="${COMP_WORDS[i]}"',
        '        case " $(_tfgpu_install_subs "$path") " in *" $w "*) path="$path/$w" ;; esac',
        "    done",
        '    COMPREPLY=($(compgen -W "$(_tfgpu_install_words "$path")" -- "$cur"))',
        "}",
        f"complete -o default -F _tfgpu_install {PROG}",
        "",
    ])


def zsh(tree: Node) -> str:
    _check(tree)
    words = [f'        "{p}") print -r -- "{" ".join(list(n.subs) + list(n.flags))}" ;;' for p, n in _paths(tree)]
    subs = [f'        "{p}") print -r -- "{" ".join(n.subs)}" ;;' for p, n in _paths(tree) if n.subs]
    return "\n".join([
        f"#compdef {PROG}",
        f"# {PROG} completion for zsh: eval \"$({PROG} completion zsh)\" (after compinit, e.g. in ~/.zshrc)",
        "_tfgpu_install_words() {",
        '    case "$1" in',
        *words,
        "    esac",
        "}",
        "_tfgpu_install_subs() {",
        '    case "$1" in',
        *subs,
        "    esac",
        "}",
        "_tfgpu_install() {",
        '    local level="" w i',
        "    local -a known cands",
        "    for ((i = 2; i < CURRENT; i++)); do",
        '        w="${words[i]}"',
        '        known=(${=$(_tfgpu_install_subs "$level")})',
        '        (( ${known[(Ie)$w]} )) && level="$level/$w"',
        "    done",
        '    cands=(${=$(_tfgpu_install_words "$level")})',
        "    compadd -a cands || _files  # nothing of ours matches (a flag's value): file names",
        "}",
        f"(( $+functions[compdef] )) && compdef _tfgpu_install {PROG}",
        "",
    ])


def fish(tree: Node) -> str:
    _check(tree)
    lines = [f"# {PROG} completion for fish: {PROG} completion fish > ~/.config/fish/completions/{PROG}.fish",
             f"complete -c {PROG} -e"]
    for path, node in _paths(tree):
        parts = [p for p in path.split("/") if p]
        seen = [f"__fish_seen_subcommand_from {p}" for p in parts]
        if node.subs:
            cond = seen + [f"not __fish_seen_subcommand_from {' '.join(node.subs)}"]
            for name, sub in node.subs.items():
                desc = f" -d '{_one_line(sub.help)}'" if sub.help else ""
                lines.append(f"complete -c {PROG} -f -n '{'; and '.join(cond)}' -a {name}{desc}")
        cond = seen or ["true"]
        for flag in node.flags:
            if flag.startswith("--"):
                lines.append(f"complete -c {PROG} -n '{'; and '.join(cond)}' -l {flag[2:]}")
            elif flag.startswith("-"):
                lines.append(f"complete -c {PROG} -n '{'; and '.join(cond)}' -s {flag[1:]}")
    return "\n".join(lines + [""])


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}
