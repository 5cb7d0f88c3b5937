"""Started with tests/support/faultsite first on PYTHONPATH (tests/support/faults.fault_env): arm the
fault hooks the test asked for through TFGPU_TEST_KILL_AT / _STOP_AT / _FAIL_AT, before the tool
builds its context. Inert without them, and in a Python that cannot import the tool (the pythons
the tool itself starts inherit PYTHONPATH)."""

import os

if any(os.environ.get(v) for v in ("TFGPU_TEST_KILL_AT", "TFGPU_TEST_STOP_AT", "TFGPU_TEST_FAIL_AT")):
    try:
        from tfgpu_install import context as _context
    except (ImportError, SyntaxError):  # another interpreter (a target env's python): nothing to arm there
        _context = None  # type: ignore[assignment]
    if _context is not None:
        _context.ARMED_HOOKS = _context.Hooks(
            kill_at=os.environ.get("TFGPU_TEST_KILL_AT") or None,
            stop_at=os.environ.get("TFGPU_TEST_STOP_AT") or None,
            fail_at=os.environ.get("TFGPU_TEST_FAIL_AT") or None,
        )
