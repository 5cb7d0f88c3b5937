"""Issue 41 defect 4 (pure parts): the benchmark's headline is TensorFlow's default math, said so, and the
mixed-precision advice is measured and names the Keras policy."""

from __future__ import annotations

import sys

from tests.support.stublibs import CHECK_SCRIPT

sys.path.insert(0, str(CHECK_SCRIPT.parent))
import tfgpucheck_tf as tfl  # noqa: E402

H100_ROW = {"n": 8192, "fp32_gflops": 51000.0, "tf32_gflops": 378000.0, "fp16_gflops": 690000.0,
            "bf16_gflops": 700000.0}


def test_the_headline_on_ampere_and_later_is_tf32_and_says_so() -> None:
    """Before: the headline was FP32 with TF32 off, unlabelled: 51 TFLOP/s where a model gets 378."""
    head = tfl.headline(H100_ROW, tf32_default=True, cc=(9, 0))
    assert head == {"gflops": 378000.0, "math": "tf32",
                    "why": "TensorFlow's default float32 math on compute capability >= 8.0 is TF32"}
    assert tfl.headline(H100_ROW, tf32_default=True, cc=(7, 5))["math"] == "fp32"  # Turing has no TF32
    off = tfl.headline(H100_ROW, tf32_default=False, cc=(9, 0))
    assert off["math"] == "fp32" and "TF32 is off" in off["why"]


def test_mixed_precision_advice_is_measured_and_names_the_policy() -> None:
    """Before: 'eligible' from the compute capability alone, no policy named."""
    head = tfl.headline(H100_ROW, True, (9, 0))
    advice = tfl.mixed_precision_advice(H100_ROW, head)
    assert advice["measured"] and advice["policy"] == "mixed_bfloat16" and advice["speedup_over_default"] == 1.85
    assert "tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')" in advice["advice"]
    turing = {"n": 4096, "fp32_gflops": 8000.0, "tf32_gflops": 8000.0, "fp16_gflops": 60000.0}
    t = tfl.mixed_precision_advice(turing, tfl.headline(turing, True, (7, 5)))
    assert t["policy"] == "mixed_float16" and t["worth_it"] is True
    flat = {"n": 4096, "fp32_gflops": 9000.0, "tf32_gflops": 9000.0, "fp16_gflops": 9500.0}
    f = tfl.mixed_precision_advice(flat, tfl.headline(flat, True, (7, 0)))
    assert f["worth_it"] is False and "would gain little" in f["advice"]
    assert tfl.mixed_precision_advice({"n": 64, "fp32_gflops": 1.0, "tf32_gflops": 1.0},
                                      {"gflops": 1.0, "math": "fp32"})["measured"] is False
