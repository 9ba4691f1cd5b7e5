"""Precision check for 16-bit outputs: a downcast cannot hide inside a loose tolerance.

A kernel that computes in FP32 and rounds once on store is within half a unit in the last place (ulp) of the exact
result for every element; the eager double-rounding style (round an intermediate to the output dtype, multiply,
round again) stays within 1.5 ulp and exceeds 1 ulp on about 0.6% of elements (measured on rms_norm). Arithmetic or
accumulation in bf16/fp16 shifts whole rows by several ulp: a row error of 0.2% already puts 8% of bf16 elements
beyond 1 ulp, yet passes a 4u elementwise tolerance. So, for bf16 and fp16 outputs, at most MAX_FRACTION_BEYOND_1ULP
of the elements may be more than one ulp (plus a tiny absolute floor, for results that underflow) from the oracle.
The verdict is `tolerance`: it is part of the numeric gate.
"""

from __future__ import annotations

import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.tolerances import TolerancePolicy
from kernelproof_core.verdicts import Verdict

MAX_FRACTION_BEYOND_1ULP = 0.02
MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10}
ABS_FLOOR_OF_ATOL = 1e-3  # errors below atol * this are never counted (outputs that underflow to zero)


def fraction_beyond_1ulp(out: torch.Tensor, reference: torch.Tensor, policy: TolerancePolicy) -> float | None:
    """Share of elements more than one output-dtype ulp from the float64 oracle; None for other dtypes."""
    bits = MANTISSA_BITS.get(out.dtype)
    if bits is None or out.numel() == 0:
        return None
    tiny = torch.finfo(out.dtype).smallest_normal
    r = reference.double()
    ulp = torch.exp2(torch.floor(torch.log2(r.abs().clamp_min(tiny))) - bits)
    err = (out.double() - r).abs()
    beyond = (err > ulp + policy.atol * ABS_FLOOR_OF_ATOL) & torch.isfinite(r)
    return float(beyond.double().mean().item())


def check_precision(out: torch.Tensor, reference: torch.Tensor, policy: TolerancePolicy) -> float | None:
    """Raise `tolerance` when too many elements are beyond one ulp; return the measured share."""
    share = fraction_beyond_1ulp(out, reference, policy)
    if share is not None and share > MAX_FRACTION_BEYOND_1ULP:
        raise CandidateFailure(
            Verdict.TOLERANCE,
            f"precision: {share:.1%} of elements are more than 1 ulp from the exact result (at most "
            f"{MAX_FRACTION_BEYOND_1ULP:.0%}); FP32 math rounded once on store is within 0.5 ulp, so the kernel "
            "computes or accumulates in a narrower type",
        )
    return share
