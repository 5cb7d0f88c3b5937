"""The command line: an argparse table and a thin dispatch. No logic lives here."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from tfgpu_install import __version__
from tfgpu_install.commands import COMMANDS, DEFAULT
from tfgpu_install.errors import ExitCode, TfgpuError, UsageError

if TYPE_CHECKING:
    import argparse

    from tfgpu_install.runner import Runner


def _parser_class() -> "type[argparse.ArgumentParser]":
    """argparse is imported only when a parser is built: the no-op fast path needs none."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(message, hint=_suggestion(self, message) or f"see `{self.prog} --help`")

    return _Parser


def _suggestion(parser: argparse.ArgumentParser, message: str) -> Optional[str]:
    """"did you mean `--profile`?" for an unrecognized flag: the closest of the flags this parser and
    its subcommands know (argparse reports unknown flags from the top parser)."""
    import difflib

    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return None
    known = _option_strings(parser)
    for word in message[len(prefix):].split():
        flag = word.split("=", 1)[0]
        if flag.startswith("-"):
            close = difflib.get_close_matches(flag, [k for k in known if k != flag], n=1, cutoff=0.6)
            if close:
                return f"did you mean `{close[0]}`? (see `{parser.prog} --help`)"
    return None


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    import argparse

    found: list[str] = []
    for action in parser._actions:
        found.extend(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_option_strings(sub))
    return sorted(set(found))


def _unknown_command(word: str) -> UsageError:
    import difflib

    close = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.6)
    hint = f"did you mean `tfgpu-install {close[0]}`?" if close else "see `tfgpu-install --help` for the commands"
    return UsageError(f"unknown command '{word}'", hint=hint)


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"tfgpu_install.commands.{COMMANDS[name].module}")


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole parser, or (`only`: the command being run) just that command's subparser:
    each subparser imports its command module and costs argparse set-up, and a run needs one.
    `--help` and a bare `tfgpu-install` still build them all."""
    import argparse

    parser_class = _parser_class()
    common = parser_class(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document")
    common.add_argument("--debug", action="store_true", help="show a traceback on errors")
    parser = parser_class(
        prog="tfgpu-install",
        description="A working, verified TensorFlow GPU environment from one command.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"tfgpu-install {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class)
    for name, row in COMMANDS.items():
        if only is not None and name != only:
            continue
        # the description and the example come from the one table (commands/__init__.py), kept as written
        p = sub.add_parser(name, help=row.help, description=row.help,
                           formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
        _module(name).add_arguments(p)
        p.epilog = "\n\n".join(part for part in (p.epilog, f"example:\n  {row.example}") if part)
        _describe_actions(p, dict(row.actions))
    return parser


def _describe_actions(parser: argparse.ArgumentParser, examples: Mapping[str, str]) -> None:
    """`snapshot restore --help` and the like: the action's one line as its description, and its example
    from the command table, as the command itself shows them."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                child.description = child.description or helps.get(name)
                child.formatter_class = argparse.RawDescriptionHelpFormatter
                if name in examples:
                    child.epilog = "\n\n".join(part for part in (child.epilog, f"example:\n  {examples[name]}") if part)


def _with_default_command(argv: list[str]) -> list[str]:
    """`tfgpu-install --profile stable` means `tfgpu-install install --profile stable`.

    Only the global flags may stand before a command name; a flag starts an install. A first word that
    is not a flag and not a command is a mistyped command (install takes no positional argument).
    """
    for arg in argv:
        if arg in ("-h", "--help", "--version"):
            return argv
        if arg in ("--json", "--debug"):
            continue
        if arg in COMMANDS:
            return argv
        if not arg.startswith("-"):
            raise _unknown_command(arg)
        break
    return [DEFAULT] + argv


def _keep_global_flags(args: argparse.Namespace, full: list[str]) -> None:
    """`tfgpu-install --json probe`: argparse lets the subcommand's own --json default (False)
    overwrite the one given before the command name; the flags count wherever they stand."""
    before = full[: full.index(args.command)] if args.command in full else []
    args.json = args.json or "--json" in before
    args.debug = args.debug or "--debug" in before


def main(
    argv: Optional[Sequence[str]] = None,
    environ: Optional[Mapping[str, str]] = None,
    runner: Optional["Runner"] = None,
) -> int:
    """`runner` lets tests run a command in-process against recorded outputs (ReplayRunner)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args_list
    debug = "--debug" in args_list
    try:
        full = _with_default_command(args_list)
        lead = [a for a in full if a not in ("--json", "--debug")][:1]
        chosen = lead[0] if lead and lead[0] in COMMANDS else None  # None: --help/--version/nothing
        early = COMMANDS[chosen].early if chosen else ""
        if early and runner is None and not {"-h", "--help"} & set(full):
            fast = importlib.import_module(f"tfgpu_install.commands.{early}").answer(full, environ, as_json, debug)
            if fast is not None:
                return int(fast)
        if not [a for a in args_list if a not in ("--json", "--debug")]:
            build_parser().print_help()  # every command, not just install's
            return int(ExitCode.USAGE)
        parser = build_parser(only=chosen)
        args = parser.parse_args(full)
        args.argv = tuple(full)
        _keep_global_flags(args, full)
        from tfgpu_install.console import render
        from tfgpu_install.context import build_context

        ctx = build_context(environ, runner=runner, debug=args.debug)
        result = _module(args.command).run(args, ctx)
        render(result, as_json=args.json)
        return int(result.exit_code)
    except TfgpuError as err:
        if debug:
            import traceback

            traceback.print_exc()
        from tfgpu_install.console import render_error

        render_error(err, as_json)
        return int(err.code)
    except OSError as exc:
        from tfgpu_install.errors import disk_full, is_disk_full

        if not is_disk_full(exc):
            return _internal_error(exc, as_json, debug)
        # The last net: a write no layer below wrapped still says what is full, exit 6.
        no_space = disk_full(exc.filename or "?", exc)
        from tfgpu_install.console import render_error

        render_error(no_space, as_json)
        return int(no_space.code)
    except KeyboardInterrupt:
        from tfgpu_install.console import render_error
        from tfgpu_install.errors import Interrupted

        stop = Interrupted("interrupted", "run the same command again to resume, or `tfgpu-install rollback`")
        render_error(stop, as_json)  # under --json still one document on stdout
        return int(stop.code)
    except Exception as exc:  # noqa: BLE001 (the last resort: a bug is one readable line, its traceback under --debug)
        return _internal_error(exc, as_json, debug)


def complete(environ: Mapping[str, str], output_stream: Optional[object] = None) -> int:
    """Answer a shell's completion request from the whole parser (tfgpu_install/completion.py); what the
    shell asks is in `environ` (argcomplete reads it from the process environment the shell set)."""
    from tfgpu_install.completion import answer
    from tfgpu_install.context import build_context

    try:
        answer(build_parser(), build_context(environ), COMMANDS, output_stream=output_stream)
    except TfgpuError:
        return int(ExitCode.USAGE)  # nothing to offer (an unreadable state dir): the shell offers nothing
    return int(ExitCode.OK)


def _internal_error(exc: Exception, as_json: bool, debug: bool) -> int:
    if debug:
        raise exc
    from tfgpu_install.console import render_error

    render_error(
        TfgpuError(f"internal error: {type(exc).__name__}: {exc}", "re-run with --debug and report the traceback"),
        as_json,
    )
    return int(ExitCode.FAILURE)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
