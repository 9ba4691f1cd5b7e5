"""ANCHOR (softmax's resident kernel without a running max in its stats pass; an experiment, off) on a GPU: the
softmax task's own tolerance against the float64 oracle, on ordinary rows and on every kind of row that must take the
redo (CARRY's stats pass again over the held row: sums that overflow past their warp's anchor, warps whose first
chunk is all masked, NaN) and SAFE's second look (maxes past _CARRY_MAX). Its builds are checked on the CPU in
tests/core/test_resident_softmax_anchor.py."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import softmax

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

# (m, n): PAIR (65536), two programs an SM (40000), windows (33508, 49196, 131071), streamed rows under HOLD (131072),
# one row
SHAPES = [(133, 65536), (140, 40000), (131, 33508), (5, 131072), (3, 131071), (1, 65536), (400, 49196)]


def _plans(m: int, n: int) -> tuple[softmax.Launch, softmax.Launch]:
    """The resident plan of an m x n contiguous softmax on this GPU without ANCHOR and with it."""
    index = torch.cuda.current_device()
    args = (m, n, softmax._align(2, n), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index))
    plain = softmax._resident_plan(*args, realign=n % 8 != 0, anchor=False)
    anchor = softmax._resident_plan(*args, realign=n % 8 != 0, anchor=True)
    assert plain is not None and anchor is not None and anchor[1]["ANCHOR"] and "ANCHOR" not in plain[1]
    return plain, anchor


def _check_anchor(x: torch.Tensor) -> None:
    """x through the resident launch with ANCHOR: within the softmax task's tolerance policy against float64, no NaN,
    nothing written past the output (a guard row), the same bytes on a second call, and each output within two
    16-bit steps of the same launch without ANCHOR (CARRY's running max)."""
    from kernelproof_core.tolerances import policy_for

    (m, n), dtype = x.shape, x.dtype
    plain, anchor = _plans(m, n)
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
    anchor[0](x, out, m, n, n, **anchor[1])
    got, ref = out[:m].double(), torch.softmax(x.double(), dim=-1)
    policy = policy_for("softmax", dtype)
    assert not bool(got.isnan().any())
    assert bool(((got - ref).abs() <= policy.atol + policy.rtol * ref.abs()).all())
    assert float((got - ref).norm() / ref.norm()) <= policy.max_rel_l2
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    again = torch.empty_like(out[:m])
    anchor[0](x, again, m, n, n, **anchor[1])
    assert torch.equal(again, out[:m]), "a second call wrote other bytes"
    want = torch.empty_like(again)
    plain[0](x, want, m, n, n, **plain[1])
    step = torch.finfo(dtype).eps * want.double().abs() + 2 * torch.finfo(dtype).tiny
    assert bool(((want.double() - got).abs() <= 2 * step).all()), "more than two 16-bit steps from CARRY's output"


@requires_cuda
@pytest.mark.parametrize(("dtype", "offset", "spread"), [
    (torch.bfloat16, 0.0, 4.0), (torch.float16, 0.0, 4.0), (torch.bfloat16, 1e8, 1e6), (torch.bfloat16, -1e8, 1e6),
    (torch.bfloat16, 4e8, 1e6), (torch.float16, 6e4, 64.0), (torch.float16, 6e4, 16.0), (torch.bfloat16, 0.0, 0.01),
    (torch.bfloat16, 0.0, 200.0)])
@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_anchor_softmax_meets_the_task_tolerance(m: int, n: int, dtype: torch.dtype, offset: float,
                                                 spread: float) -> None:
    """ANCHOR on the resident kernel's launches (PAIR, two programs an SM, windows, streamed chunks, one row): logits
    offset by 1e8 and 4e8 (the hidden `offset` profile's bf16 draws, whose anchors' ulp is 16-64: log2 of a thread's
    sum must not be added to its anchor before the shift is taken off, which an H100 run of the built-ins' offset
    tests with ANCHOR planned caught; 6e4 in fp16, spread 64 and 16), near-flat rows and rows spread over
    hundreds (elements past their warp's anchor by more than 128 binary orders: those rows take the redo),
    -inf entries and a row mostly -inf."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.randn(m, n, device="cuda", generator=gen) * spread + offset).to(dtype)
    x[0, ::5] = float("-inf")
    if m > 1:
        x[-1, n // 3:] = float("-inf")
    _check_anchor(x)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_anchor_softmax_rows_its_anchors_cannot_sum(m: int, n: int, dtype: torch.dtype) -> None:
    """Rows ANCHOR cannot sum against its anchors (CARRY's pass again over the held row), beside ordinary ones: a
    first chunk at -100 before ordinary logits (every later element overflows past its warp's anchor), one at -40
    (sums near 2^80, brought to the row's shift once, no overflow), a first half masked by the dtype's lowest (warps
    with no anchor; Hugging Face's masks), by -inf and by -1e10 (bf16), a row wholly masked by the lowest (uniform),
    bf16 rows at 1e10 and -1e10 (maxes past _CARRY_MAX: SAFE's second look), rows of one large value at the end."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = (torch.randn(max(m, 9), n, device="cuda", generator=gen) * 4).to(dtype)  # nine rows at least
    lowest = torch.finfo(dtype).min
    chunk = 32 * 32 * 8  # at least a chunk of every plan (32 warps of 8-element vectors)
    x[0, :chunk] = -100.0
    x[1, :chunk] = -40.0
    x[2, : n // 2] = lowest
    x[3, : n // 2] = float("-inf")
    x[4, : n // 2] = -1e10 if dtype == torch.bfloat16 else lowest
    x[5, :] = lowest
    if dtype == torch.bfloat16:
        x[6, :] = (torch.randn(n, device="cuda", generator=gen) * 1e8 + 1e10).to(dtype)
        x[7, :] = (torch.randn(n, device="cuda", generator=gen) * 1e8 - 1e10).to(dtype)
    x[8, -1] = 80.0
    _check_anchor(x)
