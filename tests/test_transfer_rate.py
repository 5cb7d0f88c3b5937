"""The rate and the time left are smoothed and start only once bytes have moved for a while (#43 item 7:
the first estimates of a real install said "1 h 47 min" for a download that took two minutes)."""

from __future__ import annotations

import pytest

from tfgpu_install.transfer_rate import TransferRate


def test_the_time_before_the_first_byte_is_not_counted_as_slow_transfer() -> None:
    r = TransferRate()
    r.add(0.0, 0)
    r.add(20.0, 0)  # 20 s resolving and connecting
    for t in range(21, 30):  # then 10 MB/s
        r.add(float(t), (t - 20) * 10e6)
    assert r.rate() == pytest.approx(10e6)
    assert r.left(90e6, 190e6) == pytest.approx(10.0)


def test_no_rate_and_no_time_left_at_the_start() -> None:
    r = TransferRate()
    r.add(0.0, 0)
    r.add(0.5, 65_536)  # the first 64 KiB of a 2.3 GiB download: a wild guess if it were said
    assert r.rate() is None and r.left(65_536, 2.3 * 2**30) is None
    r.add(2.0, 10e6)
    assert r.rate() is None  # 2 s of moving bytes: not yet
    r.add(4.0, 30e6)
    assert r.rate() is not None and r.left(30e6, 100e6) is not None


def test_one_slow_interval_moves_the_estimate_little() -> None:
    r = TransferRate()
    r.add(0.0, 0)
    done = 0.0
    for t in range(1, 31):  # 30 s at 10 MB/s
        done += 10e6
        r.add(float(t), done)
    r.add(31.0, done + 1e6)  # one second at 1 MB/s
    assert 8e6 < (r.rate() or 0) < 10e6  # a plain average of the last interval would say 1 MB/s


def test_bytes_that_arrive_in_lumps_average_out() -> None:
    """uv says a file's bytes only when the file is done: 50 MB every 5 s is 10 MB/s."""
    r = TransferRate()
    r.add(0.0, 0)
    for i in range(1, 9):
        r.add(5.0 * i, 50e6 * i)
    assert r.rate() == pytest.approx(10e6)


def test_a_count_that_goes_back_starts_afresh_and_a_finished_one_has_no_time_left() -> None:
    r = TransferRate()
    for t in range(0, 10):
        r.add(float(t), t * 1e6)
    assert r.left(10e6, 10e6) is None and r.left(5e6, None) is None
    r.add(10.0, 0)
    assert r.rate() is None


def test_bytes_after_a_long_silence_say_nothing_about_the_rate() -> None:
    """A small file's bar vanished between two of uv's redraws; its end is only known when the whole
    install says so, a minute later: 800 KiB over that minute is not its rate (the log said 4.6 KiB/s)."""
    r = TransferRate()
    r.add(0.0, 0)
    for t in range(1, 6):
        r.add(float(t), t * 64 * 1024)
    assert r.rate() is not None
    r.add(65.0, 874.7 * 1024)
    assert r.rate() is None and r.left(874.7 * 1024, 2e6) is None
