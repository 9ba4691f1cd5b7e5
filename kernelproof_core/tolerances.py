"""Tolerance policies: the one table that says how close is close enough, per task and output dtype.

A case passes the numeric gate only if BOTH hold:
  1. elementwise  |c - r| <= atol + rtol * |r|      for every element, and
  2. magnitude    ||c - r||_2 / ||r||_2 <= max_rel_l2  (over the whole output).
The second check is what stops an all-zeros output from passing a task whose outputs are small: softmax rows of width
32768 are ~3e-5, below any elementwise atol that bf16 rounding needs, but zeros have a relative L2 error of exactly 1.

The numbers follow the output format's unit roundoff u (bf16 2^-8, fp16 2^-11): a kernel that computes in FP32 and
rounds once on store is within u per element, so rtol is 4u (headroom for another reduction order and approximate
exp/rsqrt), and max_rel_l2 is 2.5-3u (a correct bf16 rms_norm measures 0.85u = 0.0033 in relative L2). FP32 outputs
carry only reduction-order and approximate-math differences (measured ~1e-7), so 2e-5 / 1e-5 leaves ample room.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True, slots=True)
class TolerancePolicy:
    atol: float
    rtol: float
    max_rel_l2: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


_BF16 = TolerancePolicy(atol=1e-2, rtol=1.6e-2, max_rel_l2=1e-2)
_FP16 = TolerancePolicy(atol=1e-3, rtol=2e-3, max_rel_l2=1.5e-3)
_FP32 = TolerancePolicy(atol=1e-5, rtol=2e-5, max_rel_l2=1e-5)

# Softmax probabilities are in (0, 1] and most are tiny on wide rows, so the absolute floor is far lower.
_SOFTMAX_BF16 = TolerancePolicy(atol=1e-5, rtol=1.6e-2, max_rel_l2=1e-2)
_SOFTMAX_FP16 = TolerancePolicy(atol=1e-6, rtol=2e-3, max_rel_l2=1.5e-3)
_SOFTMAX_FP32 = TolerancePolicy(atol=1e-8, rtol=2e-5, max_rel_l2=1e-5)

TOLERANCES: dict[str, dict[torch.dtype, TolerancePolicy]] = {
    "rms_norm": {torch.bfloat16: _BF16, torch.float16: _FP16, torch.float32: _FP32},
    "swiglu": {torch.bfloat16: _BF16, torch.float16: _FP16, torch.float32: _FP32},
    "softmax": {torch.bfloat16: _SOFTMAX_BF16, torch.float16: _SOFTMAX_FP16, torch.float32: _SOFTMAX_FP32},
}


def policy_for(task: str, dtype: torch.dtype) -> TolerancePolicy:
    """The policy for one task and output dtype; KeyError means the task does not support that dtype."""
    return TOLERANCES[task][dtype]
