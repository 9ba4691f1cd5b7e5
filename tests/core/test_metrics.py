"""Error metrics and the magnitude-aware tolerance check."""

from __future__ import annotations

import math

import torch

from kernelproof_core.metrics import error_metrics, within_tolerance
from kernelproof_core.tolerances import policy_for


def test_zeros_cannot_pass_wide_softmax_rows() -> None:
    """Row width 131072: every probability (~7.6e-6) is below the bf16 softmax atol, so zeros pass elementwise.
    The relative-L2 check is what rejects them."""
    logits = torch.randn(2, 131072, generator=torch.Generator().manual_seed(0)) * 0.01
    ref = torch.softmax(logits.double(), dim=-1)
    policy = policy_for("softmax", torch.bfloat16)
    zeros = torch.zeros_like(ref, dtype=torch.bfloat16)
    m = error_metrics(zeros, ref, policy)
    assert m.mismatch_count == 0  # elementwise alone would have passed
    assert m.rel_l2 == 1.0 and not within_tolerance(m, policy)
    honest = error_metrics(ref.to(torch.bfloat16), ref, policy)
    assert within_tolerance(honest, policy) and honest.rel_l2 < 5e-3


def test_metrics_values() -> None:
    ref = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    out = torch.tensor([[1.0, 2.5], [3.0, 4.0]], dtype=torch.float32)
    m = error_metrics(out, ref, policy_for("rms_norm", torch.float32))
    assert m.numel == 4 and m.mismatch_count == 1 and m.first_mismatch_index == [0, 1]
    assert m.max_abs == 0.5 and m.max_rel == 0.25 and m.mean_abs == 0.125
    assert math.isclose(m.rmse, 0.25) and math.isclose(m.rel_l2, 0.5 / math.sqrt(30))
    assert 0.99 < m.cosine < 1.0


def test_nan_is_always_a_mismatch() -> None:
    ref = torch.ones(3, dtype=torch.float64)
    out = torch.tensor([1.0, float("nan"), 1.0])
    m = error_metrics(out, ref, policy_for("swiglu", torch.float32))
    assert m.mismatch_count == 1 and m.first_mismatch_index == [1]
    assert math.isinf(m.max_abs) and not within_tolerance(m, policy_for("swiglu", torch.float32))
