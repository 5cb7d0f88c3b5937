"""`install` again on a complete env, nothing it depends on changed: the last run's answer,
without the parser, the probe or the steps (tfgpu_install/app/noop.py says what is checked).
The command table's `early` hook for install (commands/__init__.py); imports stay few."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from tfgpu_install.errors import ExitCode


def answer(argv: Sequence[str], environ: Optional[Mapping[str, str]], as_json: bool, debug: bool) -> Optional[int]:
    from tfgpu_install.app.noop import answer as stamped
    from tfgpu_install.context import build_context

    found = stamped(argv, build_context(environ, debug=debug))
    if found is None:
        return None
    from tfgpu_install.console import render
    from tfgpu_install.report import Result, Text

    render(Result(data=found["data"], blocks=[Text(found["message"], "ok")]), as_json=as_json)
    return int(ExitCode.OK)
