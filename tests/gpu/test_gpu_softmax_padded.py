"""PADDED (the resident softmax on 16-bit rows padded off cp.async's grid; an experiment, off) on a GPU: the softmax
task's own tolerance against the float64 oracle, the same bytes where its windows are the contiguous rows' windows,
and its place in the built-in's plan when switched on. Its plan rules and sm_90 builds are checked on the CPU in
tests/core/test_resident_softmax_padded.py; its speed is kernel_sweep.py's family `softmax_resident_padded`."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import softmax

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


# PADDED's forms: lane 31's next vector by an L2 load (""), copied into its warp's tail with each chunk ("tails"), or
# read from a tail laid after the warp's vectors at a shifted address ("lds")
VARIANTS = ("", "tails", "lds")


def _plan(m: int, n: int, padded: bool, variant: str = "") -> softmax.Launch:
    """The resident launch of m x n rows through windows on this GPU, PADDED (in one of its VARIANTS) or as contiguous
    rows (REALIGN)."""
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, 1, 2, softmax._cuda_sms(index), softmax._smem_per_sm(index), realign=True,
                                  padded=padded, padded_tails=variant == "tails", padded_lds=variant == "lds")
    assert plan is not None and bool(plan[1].get("PADDED")) is padded
    return plan


def _padded_logits(m: int, n: int, pad: int, dtype: torch.dtype) -> torch.Tensor:
    """m x n logits (scale 4) in rows `pad` elements apart: with four rows or more, a row's max in its first element
    and another's in its last (the edge vectors); -inf in every fifth of row 0 and the last row's last two thirds
    (exact zeros out)."""
    x = (torch.randn(m, n + pad, device="cuda") * 4).to(dtype)[:, :n]
    if m >= 4:
        x[1, 0] = 40.0
        x[2, -1] = 40.0
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    return x


def _run(plan: softmax.Launch, x: torch.Tensor) -> torch.Tensor:
    """x through the launch into an output with a guard row after it, which must stay as it was."""
    m, n = x.shape
    out = torch.full((m + 1, n), 7.0, dtype=x.dtype, device="cuda")
    plan[0](x, out, m, n, x.stride(0), **plan[1])
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    return out[:m]


@requires_cuda
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n"), [(131, 33508), (97, 40361), (5, 65535), (3, 131071), (264, 49197)])
def test_padded_rows_64_apart_write_the_contiguous_rows_bytes(m: int, n: int, dtype: torch.dtype, variant: str) -> None:
    """Rows 64 elements (a 128-byte line) further apart start where the contiguous rows do in their windows, so every
    element sits in the same thread and slot and PADDED must write exactly REALIGN's bytes for the same logits: two
    programs an SM (33508-49197), one (65535), streamed chunks past the slots (131071), and y's rows at whatever
    alignment they take (PADDED's shift d is 0 here: each thread stores its own vector, the ends element by
    element). Each of PADDED's VARIANTS; TAILS and LDS take a chunk more of shared memory, so at 49197 one chunk
    is streamed from L2 where the plain form holds it (the same values either way)."""
    x = _padded_logits(m, n, 64, dtype)
    want = _run(_plan(m, n, False), x.contiguous())
    got = _run(_plan(m, n, True, variant), x)
    assert torch.equal(got, want), f"PADDED {variant} wrote other bytes than REALIGN on the same windows"


@requires_cuda
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(131, 33508, 1), (97, 40361, 9), (200, 41392, 3), (5, 65535, 7),
                                             (3, 131071, 1), (264, 49197, 33), (1, 40001, 5)])
def test_padded_rows_meet_the_softmax_policy(m: int, n: int, pad: int, dtype: torch.dtype, variant: str) -> None:
    """Rows padded off the 4-byte grid (odd strides: each row starts at another offset in its window) through PADDED:
    within the softmax task's tolerance policy against float64, no NaN, exact zeros for -inf logits, nothing written
    past the output, the same bytes on a second call, and each output within two 16-bit steps of the contiguous rows'
    REALIGN launch (other windows put elements in other threads, so sums round in another order). Odd pads give
    each row another shift d of y against x's window, so every thread's vector comes from its own and the next lane's
    (lane 31: the next warp's: loaded, or from its warp's tail with TAILS and LDS)."""
    from kernelproof_core.tolerances import policy_for

    x = _padded_logits(m, n, pad, dtype)
    plan = _plan(m, n, True, variant)
    got = _run(plan, x)
    ref = torch.softmax(x.double(), dim=-1)
    policy = policy_for("softmax", dtype)
    g = got.double()
    assert not bool(g.isnan().any())
    assert bool(((g - ref).abs() <= policy.atol + policy.rtol * ref.abs()).all())
    assert float((g - ref).norm() / ref.norm()) <= policy.max_rel_l2
    assert bool((got[0, ::5] == 0).all()) and bool((got[-1, n // 3:] == 0).all()), "-inf logits gave nonzero"
    assert torch.equal(_run(plan, x), got), "a second call wrote other bytes"
    want = _run(_plan(m, n, False), x.contiguous()).double()
    step = torch.finfo(dtype).eps * want.abs() + 2 * torch.finfo(dtype).tiny
    assert bool(((want - g).abs() <= 2 * step).all()), "more than two 16-bit steps from the contiguous rows' output"


@requires_cuda
def test_padded_switched_on_takes_the_built_ins_padded_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """With _RESIDENT_PADDED on, the built-in plans rows past 32768 padded off the 4-byte grid on the resident kernel
    with PADDED (the split path without it) and its output meets the policy; rows padded on that grid and contiguous
    rows keep their plans."""
    from kernelproof_core.tolerances import policy_for

    monkeypatch.setattr(softmax, "_RESIDENT_PADDED", True)
    monkeypatch.setattr(softmax, "_PLANS", {})
    device = torch.device("cuda", torch.cuda.current_device())
    for m, n, pad, takes in [(300, 40361, 9, True), (300, 40000, 2, False), (300, 40001, 0, False)]:
        plan = softmax._plan(m, n, n + pad, 2, device, torch.bfloat16)
        assert not hasattr(plan, "_fields") and "NCHUNK" in plan[1], (m, n, pad, plan)
        assert bool(plan[1].get("PADDED")) is takes, (m, n, pad, plan[1])
    x = _padded_logits(300, 40361, 9, torch.bfloat16)
    got = softmax.candidate(x).double()
    ref = torch.softmax(x.double(), dim=-1)
    policy = policy_for("softmax", torch.bfloat16)
    assert bool(((got - ref).abs() <= policy.atol + policy.rtol * ref.abs()).all())
