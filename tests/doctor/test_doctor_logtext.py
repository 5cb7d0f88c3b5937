"""doctor/logtext.py: colours, terminal wraps, the stop line; rules.required_literal without re internals."""

from __future__ import annotations

import re

from tests.conftest import load_cases
from tfgpu_install.doctor import logtext
from tfgpu_install.doctor.rules import required_literal


def test_clean_removes_colours_and_keeps_the_line_count() -> None:
    text = "\x1b[1;31mImportError:\x1b[0m boom\r\nnext\x1b]0;title\x07\n"
    out = logtext.clean(text)
    assert out == "ImportError: boom\nnext\n"
    assert out.count("\n") == text.replace("\r\n", "\n").count("\n")


def test_unwrap_joins_lines_cut_at_the_terminal_width() -> None:
    line = "ImportError: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.22' not found (required by /x/_pywrap.so)"
    text = "head\n" + line[:80] + "\n" + line[80:] + "\ntail"
    u = logtext.unwrap(text)
    assert u is not None and u.text == "head\n" + line + "\ntail" and u.origin == (1, 2, 4)


def test_unwrap_leaves_short_lines_and_nvidia_smi_tables_alone() -> None:
    assert logtext.unwrap("a\nb\nc") is None
    table = next(c for c in load_cases("nvidia-smi") if "|=====" in c["verbatim"])["verbatim"]
    u = logtext.unwrap(table)
    assert u is None or u.text.count("\n") >= table.count("\n") - 2


def test_stop_region_is_the_last_exception_and_its_message() -> None:
    text = ("W warn\nTraceback (most recent call last):\n  File \"a.py\", line 1\nException:\n\n"
            "  The \"tensorflow-gpu\" package has been removed!\n\nother\n")
    first, last = logtext.stop_region(text) or (0, 0)
    assert first == 4 and last >= 6
    assert logtext.stop_region("all fine\n") is None


def test_required_literal_reads_plain_runs_only() -> None:
    assert required_literal(re.compile(r"Illegal instruction \(core dumped\)")) == "Illegal instruction (core dumped)"
    assert required_literal(re.compile(r"(?m)^Illegal instruction\s*$")) == "Illegal instruction"
    assert required_literal(re.compile(r"abc|def")) == ""
    assert required_literal(re.compile(r"ab?cd")) == "cd"
    assert required_literal(re.compile(r"x(?:optional)?y")) == "x"
    assert required_literal(re.compile(r"needle", re.IGNORECASE)) == ""
    for pat in (r"ab?cd", r"version\s+.(?P<s>GLIBCXX_[\d.]+).\s+not\s+found", r"tensorflow[-_]gpu-2\.12\.0\.tar\.gz"):
        p = re.compile(pat)
        for sample in ("acd", "version `GLIBCXX_3.4.30' not found", "tensorflow_gpu-2.12.0.tar.gz"):
            if p.search(sample):
                assert required_literal(p) in sample


def test_rules_module_does_not_import_private_re() -> None:
    import tfgpu_install.doctor.rules as rules

    src = open(rules.__file__, encoding="utf-8").read()
    assert "re._parser" not in src and "sre_parse" not in src


def test_nvidia_smi_failures_pasted_into_doctor() -> None:
    from tfgpu_install.doctor.classify import classify
    from tfgpu_install.doctor.rules import load_rules

    rules = load_rules()
    # https://github.com/NVIDIA/nvidia-docker/issues/1163
    d = classify("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
                 "Display Driver is properly installed and present in your system.\n", rules)
    assert d.primary is not None and d.primary.rule_id == "nvml-library-missing" and "ldconfig" in d.primary.fix
    d = classify("NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver. "
                 "Make sure that the "
                 "latest NVIDIA driver is installed and running.\n", rules)
    assert d.primary is not None and d.primary.rule_id == "nvidia-smi-no-driver"


def test_one_line_repeated_is_not_a_wrap_and_joins_are_bounded() -> None:
    line = "1875/1875 [==============================] - 5s 3ms/step - loss: 0.0312 - accuracy: 0.9901"
    assert logtext.unwrap((line + "\n") * 500) is None  # a progress bar repeated, not a terminal wrap
    rows = [f"{i:04d}" + "x" * 76 for i in range(40)]  # 40 different rows of exactly 80 columns
    u = logtext.unwrap("\n".join(rows) + "\nend")
    assert u is not None and max(len(x) for x in u.text.split("\n")) <= logtext.MAX_JOIN * 80


def test_backward_walk_numbers_lines_from_the_end() -> None:
    text = "a\nF0504 12:30:02.978602 2662 common.cpp:163] Check failed\nb\nValueError: boom\n"
    assert logtext.stop_region(text) == (4, 5)
    assert logtext.unexplained(text, set()) == (
        "L2: F0504 12:30:02.978602 2662 common.cpp:163] Check failed", "L4: ValueError: boom")
    assert logtext.unexplained(text, {4}) == ("L2: F0504 12:30:02.978602 2662 common.cpp:163] Check failed",)


def test_a_glog_check_and_an_ipython_header_stop_the_program() -> None:
    """`Check failed:` aborts (glog CHECK), also when the paste lost its `F ...` prefix; IPython names the
    exception first. Controls: a plain line mentioning a check, and a traceback header with no name."""
    for line in ("tensorflow/core/kernels/conv_ops.cc:457] Check failed: stream->parent()",
                 "F0504 12:30:02.978602 2662 common.cpp:163] Check failed: error == cudaSuccess (30 vs. 0)",
                 "InternalError                             Traceback (most recent call last)"):
        assert (logtext.stop_region("I start\n" + line + "\n") or (0, 0))[0] == 2, line
    for line in ("the check failed twice, retrying", "Traceback (most recent call last):"):
        assert logtext.stop_region("I start\n" + line + "\n") is None, line


def test_shared_prefix_is_a_loggers_level_on_every_line_only() -> None:
    words = ("Epoch 1/3", "loading model", "I tf/a.cc:1] Created device", "done")
    prefixed = "\n".join(f"2025-03-14 09:26:5{i},589 ERROR [worker-3] {w}" for i, w in enumerate(words))
    assert prefixed.split("\n")[0][: logtext.shared_prefix(prefixed)] == "2025-03-14 09:26:50,589 ERROR [worker-3] "
    # controls: a glog severity letter, pip's own ERROR lines, TF's time stamps without a level word
    for text in ("E0614 12:00:01.1 1 a.cc:1] x\nE0614 12:00:02.1 1 a.cc:2] y\nE0614 12:00:03.1 1 a.cc:3] z",
                 "ERROR: Could not find a version\nERROR: No matching distribution\nERROR: again",
                 "2021-01-01 00:00:01.1: I tf/a.cc:1] x\n2021-01-01 00:00:02.1: E tf/b.cc:2] y\n"
                 "2021-01-01 00:00:03: W z"):
        assert logtext.shared_prefix(text) == 0, text
    # a line is error-looking by its own words, not by the prefix every line carries
    assert logtext.unexplained(prefixed, set()) == ()
    bad = prefixed + "\n2025-03-14 09:26:59,589 ERROR [worker-3] Segmentation fault"
    assert logtext.unexplained(bad, set()) == ("L5: 2025-03-14 09:26:59,589 ERROR [worker-3] Segmentation fault",)
