"""How fast bytes arrive, and how long the rest will take: for progress lines and bars.

All bytes so far over all the time so far made the first estimates wild: the time before the first
byte (resolving, connecting) counted as slow transfer, and the first small file's few bytes over a few
seconds gave "1 h 47 min left" for a download that took two minutes. Here the rate is an exponentially
weighted moving average of the rate over each interval between samples (time constant TAU seconds, so
one fast or slow interval moves it little), measured from the first sample whose bytes moved; and no
rate at all, so no time left, until bytes have moved over WARMUP seconds. Pure: the caller gives the
times.
"""

from __future__ import annotations

import math
from typing import Optional

TAU = 8.0  # seconds: how quickly the average follows a change of speed
WARMUP = 3.0  # seconds of moving bytes before a rate is given at all
# seconds without a sample after which the next one says nothing about the rate (a file whose end was only
# inferred when the whole install finished, a stall): the measurement starts again from it
MAX_GAP = 10.0


class TransferRate:
    def __init__(self, tau: float = TAU, warmup: float = WARMUP, max_gap: float = MAX_GAP) -> None:
        self.tau = tau
        self.warmup = warmup
        self.max_gap = max_gap
        self._last: Optional[tuple[float, float]] = None  # (time, bytes) of the last sample
        self._first_moved: Optional[float] = None  # when bytes first moved
        self._avg: Optional[float] = None

    def add(self, now: float, done: float) -> None:
        """A sample: at `now` (seconds, any clock), `done` bytes in all."""
        last = self._last
        if last is None or done < last[1] or now - last[0] > self.max_gap:  # first, restarted, after a silence
            self._last, self._first_moved, self._avg = (now, done), None, None
            return
        dt = now - last[0]
        if dt <= 0:
            self._last = (last[0], done)  # same instant: the bytes count toward the next interval
            return
        moved = done - last[1]
        if self._first_moved is None:
            if moved <= 0:  # nothing yet (resolving, connecting): not part of the transfer
                self._last = (now, done)
                return
            self._first_moved = last[0]
        instant = moved / dt
        weight = 1.0 - math.exp(-dt / self.tau)
        self._avg = instant if self._avg is None else self._avg + weight * (instant - self._avg)
        self._last = (now, done)

    def rate(self) -> Optional[float]:
        """Bytes per second, or None while too little has been seen to say."""
        if self._avg is None or self._first_moved is None or self._last is None:
            return None
        if self._last[0] - self._first_moved < self.warmup or self._avg <= 0:
            return None
        return self._avg

    def left(self, done: float, total: Optional[float]) -> Optional[float]:
        """Seconds until `total`, at the smoothed rate; None when unknown (no rate yet, no total, or done)."""
        rate = self.rate()
        if rate is None or not total or done >= total:
            return None
        return (total - done) / rate
