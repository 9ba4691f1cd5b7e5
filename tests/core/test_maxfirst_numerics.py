"""MAXFIRST's arithmetic against the softmax task's policies, emulated on the CPU before it runs on a GPU.

The resident kernel under MAXFIRST (kernels/softmax.py, off until the H200 measures it) keeps p = 2^((x - max) log2 e)
rounded to fp16 over each held chunk, sums p in fp32 before rounding, and writes y = p16 * 2^-log2(sum). Rounding p to
fp16 is the new error: about 2^-12 relative, and absolute 2^-25 where p falls into fp16's subnormals (under 2^-14),
which is many ulp of a bf16 y there. The tolerance check ignores errors under its atol, and the one-ulp precision rule
ignores errors under a thousandth of it (integrity/precision.py), so whether a row passes depends on how its mass
sits below its max. This runs that arithmetic in torch (fp32 like the kernel; exp2 exact to fp32 rounding where the
GPU's ex2.approx is within two ulp of it) over every distribution the task draws, at widths the resident kernel takes
(16-bit rows past 32768), through the gates' own check (tolerance, then the one-ulp share), wherever the exact
result rounded once to the output dtype passes that check. The GPU tests
(tests/gpu/test_gpu_builtin_kernels.py, `keep_meets` / `hold_meets` with MAXFIRST) run the kernel itself."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.gates import check_tolerance
from kernelproof_core.tasks import CaseSet, get_task
from kernelproof_core.tasks.softmax import softmax_input

LOG2E = 1.4426950408889634
DISTRIBUTIONS = ("normal", "large", "huge", "small", "flat", "mixed_rows", "uniform", "constant", "neg_inf", "spike",
                 "offset")


def maxfirst(x: torch.Tensor) -> torch.Tensor:
    """y as MAXFIRST computes it, in fp32 with p held in fp16."""
    xf = x.float()
    m = xf.amax(dim=-1, keepdim=True)
    p = torch.exp2((xf - m) * LOG2E)
    total = p.sum(dim=-1, keepdim=True)
    return (p.half().float() * torch.exp2(-torch.log2(total))).to(x.dtype)


def _meets(y: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> str | None:
    try:
        check_tolerance(y, reference, get_task("softmax").tolerance(dtype))
    except CandidateFailure as failure:
        return failure.message
    return None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_maxfirst_meets_the_softmax_policies_wherever_exact_rounding_does(distribution: str,
                                                                         dtype: torch.dtype) -> None:
    """At 33508-131072 wide. Where even the oracle rounded once to the output dtype misses the policy (fp16 rows of
    near-equal values past about 80000 wide: every y is an fp16 subnormal; the task never draws those, see the next
    test), no kernel can pass, and MAXFIRST is not asked to."""
    task = get_task("softmax")
    for seed, (rows, cols) in enumerate(((16, 33508), (8, 65536), (4, 131072))):
        x = softmax_input(rows, cols, dtype, torch.device("cpu"), torch.Generator().manual_seed(1000 + seed),
                          distribution)
        reference = task.oracle([x])
        if _meets(reference.to(dtype), reference, dtype) is None:
            assert _meets(maxfirst(x), reference, dtype) is None, (cols, _meets(maxfirst(x), reference, dtype))


def test_exact_rounding_meets_the_policies_at_the_widest_rows_the_task_draws() -> None:
    """The premise of the test above, and of every softmax verdict: at the widest rows the task draws in each
    distribution (fixed cases and hidden profiles), fp16 and bf16 outputs rounded once from the exact result pass."""
    task = get_task("softmax")
    widest: dict[str, int] = {}
    for case in task.cases(CaseSet.FULL, 0):
        widest[case.distribution] = max(widest.get(case.distribution, 0), case.dims["N"])
    for profile in task.hidden_profiles:
        widest[profile.distribution] = max(widest.get(profile.distribution, 0), profile.n_full[1])
    assert widest["flat"] <= 40000 and widest["uniform"] <= 50000, widest
    for distribution, cols in widest.items():
        for dtype in (torch.bfloat16, torch.float16):
            x = softmax_input(4, cols, dtype, torch.device("cpu"), torch.Generator().manual_seed(7), distribution)
            reference = task.oracle([x])
            assert _meets(reference.to(dtype), reference, dtype) is None, (distribution, cols, dtype)
