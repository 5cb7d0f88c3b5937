"""A probe source on its own thread: the probe's sources are independent child processes, so
run side by side the probe waits for the slowest instead of their sum."""

from __future__ import annotations

import threading
from typing import Callable, Generic, Optional, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """fn() on its own thread; result() waits for it and returns its value (or raises what it
    raised). The probe's sources are independent child processes (the NVML child, nvidia-smi,
    `ldconfig -p`, `nvcc -V`, each interpreter's version): run side by side, the probe waits
    for the slowest instead of their sum. Runners are safe to share between threads (the real
    one starts a process per call; the replay one only reads its table and appends)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._value: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread by result())
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
