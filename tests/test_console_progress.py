"""Progress on a stream that is not a terminal: plain lines, throttled, counters and bytes."""

from __future__ import annotations

import io

from tfgpu_install.console import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plain() -> tuple[Progress, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    p = Progress(enabled=True, stream=out)
    p._clock = clock  # a fixed clock: the throttle is tested, never timed
    return p, out, clock


def test_every_step_of_a_counter_is_a_line_and_bytes_are_throttled() -> None:
    p, out, clock = plain()
    assert p.rich is False  # a StringIO is not a terminal
    p("provisioning: env.create: create the venv", 0, 3)
    p("provisioning: packages.install: install", 1, 3)
    for i in range(1, 50):  # a download reporting every 0.1 s
        clock.now += 0.1
        p("downloading cudnn.tar.xz", i * 1e6, 100e6)
    clock.now += 10
    p("downloading cudnn.tar.xz", 100e6, 100e6)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  ... provisioning: env.create: create the venv [0/3]"
    assert lines[1] == "  ... provisioning: packages.install: install [1/3]"
    downloads = [line for line in lines if "cudnn" in line]
    assert len(downloads) == 2  # the first and the finished one; nothing in between within 5 s
    assert downloads[-1].startswith("  ... downloading cudnn.tar.xz: 95.4 MiB of 95.4 MiB (")
    assert downloads[-1].endswith("/s)")


def test_disabled_prints_nothing() -> None:
    out = io.StringIO()
    p = Progress(enabled=False, stream=out)
    p("provisioning: env.create: x", 0, 3)
    assert out.getvalue() == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _steps_result():  # type: ignore[no-untyped-def]
    from tfgpu_install.report import Result, Table, Text

    table = Table("steps", ("step", "state", "what"),
                  (("env.create", "applied", "create venv /e with\nPython 3.11"), ("verify.run", "done", "verify /e")))
    return Result(data={}, blocks=[Text("TensorFlow 2.99.0"), table])


def test_a_table_in_a_log_is_plain_aligned_text_one_line_per_row() -> None:
    from tfgpu_install.console import render

    out = io.StringIO()
    render(_steps_result(), as_json=False, stream=out)
    assert out.getvalue().splitlines() == [
        "TensorFlow 2.99.0",
        "steps",
        "  step        state    what",
        "  ----------  -------  " + "-" * len("create venv /e with Python 3.11"),
        "  env.create  applied  create venv /e with Python 3.11",
        "  verify.run  done     verify /e",
    ]


def test_a_table_on_a_terminal_is_drawn_by_rich() -> None:
    from tfgpu_install.console import render

    out = _Tty()
    render(_steps_result(), as_json=False, stream=out)
    text = out.getvalue()
    assert "┏━" in text and "│ env.create" in text and "TensorFlow 2.99.0" in text


def test_a_line_that_says_its_bytes_is_not_followed_by_them_again() -> None:
    """The install's own line names its bytes ("9.8 KiB of 9.8 KiB"): the log printed them twice."""
    p, out, clock = plain()
    p("installing 15 requirements with uv: 1/1 downloads, 9.8 KiB of 9.8 KiB", 10035.2, 10035.2)
    p("download numpy: 16.1 MiB", 4 * 2**20, 16.1 * 2**20)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  ... installing 15 requirements with uv: 1/1 downloads, 9.8 KiB of 9.8 KiB"
    assert lines[1] == "  ... download numpy: 16.1 MiB: 4.0 MiB of 16.1 MiB"  # a row: its bytes so far added
