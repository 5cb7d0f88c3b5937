"""Issue 43 item 1: a log that ends in a failure is never "nothing wrong".

The reverse NumPy ABI case (a module built against NumPy 2 imported under NumPy 1.x) was reported as
`harmless-only`, exit 0, because the only lines doctor knew were TensorFlow's start-up notices. The log
below is composed from the issue's description and NumPy's own message (numpy/_core/include/numpy/
__multiarray_api.h, `_import_array`): start-up noise, the C-API RuntimeError, then the SystemError that
stopped the program."""

from __future__ import annotations

from tfgpu_install.doctor.classify import CAUSE, HARMLESS_ONLY, UNKNOWN, classify
from tfgpu_install.doctor.rules import load_rules, parse_rules

RULES = load_rules()
NOISE = ("2025-06-02 10:14:07.101232: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on. You may "
         "see slightly different numerical results due to floating-point round-off errors from different computation "
         "orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.\n")
REVERSE_ABI = NOISE + (
    "RuntimeError: module was compiled against NumPy C-API version 0x12 (NumPy 2.0) but the running NumPy has "
    "C-API version 0x11. Check the section C-API incompatibility at the Troubleshooting ImportError section at "
    "https://numpy.org/devdocs/user/troubleshooting-importerror.html#c-api-incompatibility for indications on how "
    "to solve this problem.\n"
    "Traceback (most recent call last):\n"
    "  File \"<string>\", line 1, in <module>\n"
    "  File \"/home/u/tf/lib/python3.11/site-packages/tensorflow/__init__.py\", line 40, in <module>\n"
    "    from tensorflow.python import pywrap_tensorflow  # pylint: disable=unused-import\n"
    "SystemError: <built-in function __import__> returned a result with an exception set\n")


def test_reverse_numpy_abi_is_a_numpy_diagnosis() -> None:
    d = classify(REVERSE_ABI, RULES)
    assert d.status == CAUSE and d.primary is not None and d.primary.rule_id == "numpy-api-version"
    assert "0x11" in d.primary.cause and "0x12" in d.primary.cause
    assert "onednn-notice" in {f.rule_id for f in d.harmless}  # the notice is listed, not blamed


def test_an_unexplained_fatal_line_is_never_harmless_only() -> None:
    """Without the NumPy rule (a rules file that lacks it) the same log is `unknown`, not `harmless-only`:
    the program stopped on a line no rule explains."""
    text = open(RULES.path, encoding="utf-8").read()
    start = text.index("  - id: numpy-api-version")
    end = text.index("  - id: numpy-import-failed")
    rest = (text[:start] + text[end:]).replace("yields_to: [numpy-api-version, ", "yields_to: [")
    without = parse_rules(rest, "errors-without-numpy.yaml")
    d = classify(REVERSE_ABI, without)
    assert d.status == UNKNOWN and d.primary is None
    assert "SystemError" in d.stopped_by
    assert d.unexplained and "onednn-notice" in {f.rule_id for f in d.harmless}


def test_noise_alone_stays_harmless_only() -> None:
    d = classify(NOISE, RULES)  # control: nothing stopped the program
    assert d.status == HARMLESS_ONLY and not d.stopped_by


def test_an_ide_crash_code_after_noise_is_unknown() -> None:
    """PyCharm's 'Process finished with exit code -1073740791 (0xC0000409)' is the program dying (Windows
    STATUS_STACK_BUFFER_OVERRUN): after start-up noise it is still unknown, not harmless-only."""
    d = classify(NOISE + "Process finished with exit code -1073740791 (0xC0000409)\n", RULES)
    assert d.status == UNKNOWN and "exit code -1073740791" in d.stopped_by
    d = classify(NOISE + "Process finished with exit code 0\n", RULES)  # control: a clean exit
    assert d.status == HARMLESS_ONLY
