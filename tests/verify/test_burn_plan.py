"""Issue 41 defect 3 (pure parts): the burn's size, its exact but varied operands, and the host reference."""

from __future__ import annotations

import random
import struct
import sys
from fractions import Fraction

from tests.support.stublibs import CHECK_SCRIPT

sys.path.insert(0, str(CHECK_SCRIPT.parent))  # the check's modules import their siblings by file name
import tfgpucheck_sgemm as sgemm  # noqa: E402

H200_FREE, H200_L2 = 140 * 10**9, 60 * 2**20  # what cudaMemGetInfo / cudaDevAttrL2CacheSize give on an H200


def test_on_an_h200_the_working_set_is_far_past_the_l2_cache() -> None:
    """Before: 2048 x 2048 products into one buffer, 48 MiB in all: inside the H200's 60 MB L2."""
    plan = sgemm.burn_plan(H200_FREE, H200_L2)
    assert plan["n"] == 8192 and plan["bytes_per_product"] == 256 * 2**20
    assert plan["buffers"] * plan["bytes_per_product"] <= 0.8 * H200_FREE  # a share of free memory, as gpu-burn
    assert plan["buffers"] > 400
    # A pass is capped by time (the burn ends on a checked pass): 22 ms per product on an H200 (FP32).
    used = sgemm.passes_within(plan, 0.022, pass_seconds=3.0)
    assert used == 136 and (used + 2) * plan["bytes_per_product"] > 500 * H200_L2


def test_a_small_card_gets_a_smaller_n_and_at_least_two_buffers() -> None:
    plan = sgemm.burn_plan(600 * 2**20, 4 * 2**20)
    assert plan["n"] == 4096 and plan["buffers"] >= 1
    assert sgemm.passes_within(plan, 10.0) == 2  # a slow GPU still alternates product and check


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def test_operands_are_varied_and_every_sum_is_exact_in_float32_in_any_order() -> None:
    """Before: 9 values, multiples of 1/4 with period 9 and 11. Now: random signs, two exponents and
    three mantissa bits; a float32 sum of n = 8192 products in a random order is the exact value."""
    n = 8192
    a, b = sgemm.Operand(n, 1), sgemm.Operand(n, 2)
    values = struct.unpack("4096f", bytes(a.data[:4 * 4096]))
    assert len(set(values)) == 32 and min(values) == -3.75 and max(values) == 3.75
    assert all(Fraction(v) * 8 == int(Fraction(v) * 8) for v in values)  # multiples of 1/8
    assert [v * 8 for v in values[:64]] == a.eighths(0, 1)[:64]  # the host reads what the GPU gets
    rng = random.Random(7)
    for i, j in ((n - 1, 17), (4321, n - 1)):
        row, col = a.eighths(i, n), b.eighths(j * n, 1)
        terms = [x * y / 64.0 for x, y in zip(row, col)]
        rng.shuffle(terms)
        acc = 0.0
        for t in terms:
            acc = _f32(acc + _f32(t))
        assert acc == sgemm.exact_entry(a, b, i, j) == sum(Fraction(x * y, 64) for x, y in zip(row, col))
