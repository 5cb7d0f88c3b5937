"""#39's sweep: every command and every flag that takes a value, walked from the real parser, given
bad values (empty, huge, NaN, negative, non-UTF-8, /proc files, a directory for a file, a device,
5,000-byte paths): never exit 1 (internal error) and never a traceback. The commands run in-process
against temp dirs, with every dry run asked for and no network (a proxy that refuses), so an
accepted value changes nothing. (`fleet`: see SKIP.)"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tfgpu_install.cli import build_parser, main

LONG = "/tmp/" + "a" * 5000
BAD = ["", LONG, "nan", "-1", "1e999", "bad-\udcff\udcfe-utf8", "/proc/self/mem", "/", "/dev/zero",
       "a" * 300]
# Required arguments get a sane value so the bad one is what the command meets.
SANE = {"-o": "out", "--output": "out", "--pack": "pack", "-i": "inv.ini", "--inventory": "inv.ini"}
# The fleet commands start ansible-playbook for a value they accept (seconds each: the sweep over them
# took 14 minutes and found nothing once file_arg took the path rule); their bad input is the fleet
# area's tests (#39 item 16's fleet parts). Every other command is walked.
SKIP = {"fleet"}


def _commands(parser: argparse.ArgumentParser,
              path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path:
        yield path, parser
    for action in subs:
        for name, child in action.choices.items():
            if path or name not in SKIP:
                yield from _commands(child, path + (name,))


def _required(parser: argparse.ArgumentParser, skip: argparse.Action, tmp: Path) -> list[str]:
    out: list[str] = []
    for a in parser._actions:
        if a is skip or isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS and not a.required:
            continue
        if not a.option_strings:
            if a.nargs not in ("?", "*"):
                out.append("six" if a.dest == "requirements" else str(tmp / "missing-file"))
        elif a.required:
            out += [a.option_strings[0], str(tmp / SANE.get(a.option_strings[0], "x"))]
    return out


def _cases(tmp: Path) -> list[tuple[list[str], str]]:
    cases = []
    for path, parser in _commands(build_parser()):
        dry = ["--dry-run"] if any("--dry-run" in a.option_strings for a in parser._actions) else []
        for action in parser._actions:
            if (isinstance(action, (argparse._SubParsersAction, argparse._HelpAction, argparse._VersionAction))
                    or action.nargs == 0 or action.choices):
                continue
            rest = _required(parser, action, tmp)
            for value in BAD:
                if action.option_strings:
                    argv = [*path, *rest, *dry, f"{action.option_strings[0]}={value}" if value.startswith("-")
                            else action.option_strings[0], *([] if value.startswith("-") else [value])]
                else:
                    argv = [*path, *rest, *dry, "--", value] if value.startswith("-") else [*path, value, *rest, *dry]
                cases.append((argv, f"{' '.join(path)} {action.option_strings[:1] or [action.dest]}={value[:20]!r}"))
    return cases


@pytest.mark.e2e  # ~1,000 commands in-process: a minute
def test_no_bad_value_gives_exit_1_or_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import make_tmp_env

    environ = {**make_tmp_env(tmp_path), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
               "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9", "NO_PROXY": "",
               "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "UV_INDEX_URL": "http://127.0.0.1:9/simple"}
    monkeypatch.chdir(tmp_path)
    failures = []
    cases = _cases(tmp_path)
    assert len(cases) > 300  # the walk found the commands and their flags
    for argv, what in cases:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        try:
            code = main([*argv, "--json"], environ=environ)
        except SystemExit as exc:  # argparse's own --help/--version paths
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        if code == 1 or "Traceback" in out + err:
            failures.append(f"{what}: exit {code}: {(err or out).strip()[-200:]}")
    assert not failures, f"{len(failures)} of {len(cases)}:\n" + "\n".join(failures[:80])


@pytest.mark.parametrize("argv", [["status"], ["check"], ["kernel", "install"], ["kernel", "remove"], ["add", "six"],
                                  ["upgrade"], ["verify"], ["doctor"], ["rollback"], ["snapshot", "export"]])
def test_a_5000_byte_env_path_is_a_usage_error_naming_its_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """#39 item 16 (its non-fleet parts): exit 1 (ENAMETOOLONG from deep inside) before; now exit 2
    at parse time. The control: a short path that is not there is the command's own answer."""
    from tests.conftest import make_tmp_env

    environ = make_tmp_env(tmp_path)
    assert main([*argv, "--env", LONG, "--json"], environ=environ) == 2
    assert "bytes long" in capsys.readouterr().out
    code = main([*argv, "--env", str(tmp_path / "no-such-env"), "--json"], environ=environ)
    capsys.readouterr()
    assert code not in (1, 2), argv


def test_snapshot_image_and_with_file_of_proc_self_mem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import make_tmp_env

    environ = make_tmp_env(tmp_path)
    assert main(["snapshot", "image", LONG, "-o", str(tmp_path / "img"), "--json"], environ=environ) == 2
    assert "bytes long" in capsys.readouterr().out
    for argv in (["add", "six", "--with-file", "/proc/self/mem"], ["add", "--with-file", "/proc/self/mem", "six"]):
        assert main([*argv, "--json"], environ=environ) == 5, argv
        assert "cannot read /proc/self/mem" in capsys.readouterr().out
    ok = tmp_path / "requirements.txt"  # the control: a real file is read (then: no env to add to)
    ok.write_text("six\n")
    assert main(["add", "--with-file", str(ok), "--json"], environ=environ) == 6
    assert "env-not-found" in capsys.readouterr().out
