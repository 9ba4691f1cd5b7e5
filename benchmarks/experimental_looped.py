"""Wide-row kernels under evaluation: one program per row, looping over the row twice with software-pipelined loads.

Rows too wide for one program's registers (softmax past 32768 elements, rms_norm past 32768 16-bit elements) ship on
the split and staged paths, which stop near 70% of copy bandwidth on the H200 (kernel_sweep.py --only softmax /
rms_norm_wide): each program loads, reduces, waits, then stores, and too few bytes are in flight per SM meanwhile.
The looped designs tried before (a persistent grid walking rows, two passes over each row) reached 36-58%, with
`while` loops that Triton does not pipeline: every chunk's load waited for the previous chunk's arithmetic.

Here both passes are `tl.range(..., num_stages=STAGES)` loops, so Triton's pipeliner keeps STAGES - 1 chunks of
loads in flight while the current chunk is reduced (STAGES=1: the unpipelined baseline of the same kernel). The grid
is persistent and sized so that the rows in flight (one per program) fit an L2 budget: pass 1 reads the row from HBM
(kept in L2 with `evict_last`), pass 2 re-reads it from L2 (`evict_first`) and writes the output, so HBM sees one
read and one write. Softmax keeps a per-lane running max and sum of exponentials in pass 1 (no cross-thread reduction
per chunk: one per row), in base 2 (`exp2` is one instruction). N is a constexpr: one compile per row width, which a
sweep can afford and the interpreter needs (it cannot iterate a runtime-bound range).

Result on the H200 (bf16, CUPTI kernel time, evidence/h200/2026-11-30_gather_campaign/1_*): not shipped. Pipelining
helped the looped design itself (rms_norm 1024 x 65536, 2048-element chunks on 4 warps: 30.7-44.5% of copy at
STAGES=1, 53.5-61.1% at STAGES=5) but it beat the shipped paths only at rms_norm 1024 x 40000 (74.2% against 66.9%);
softmax 43-63% against 65-88% shipped, rms_norm 65536 wide 67.8% against 69.9%, unaligned rows 29-33% against 44%.
Kept so the sweep can be rerun on other GPUs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelproof_core.kernels.rms_norm import _num_sms

_LOG2E = 1.4426950408889634
L2_BUDGET_BYTES = 32 << 20  # rows in flight stay within this much of the H200's 50 MB L2


@triton.jit
def _rms_norm_looped(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, stride_x: tl.tensor,
                     eps: tl.tensor, N: tl.constexpr, CHUNK: tl.constexpr, STAGES: tl.constexpr) -> None:
    cols = tl.arange(0, CHUNK)
    row = tl.program_id(0)
    while row < M:
        x_row = x_ptr + row.to(tl.int64) * stride_x
        acc = tl.zeros((CHUNK,), dtype=tl.float32)
        for start in tl.range(0, N, CHUNK, num_stages=STAGES):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0,
                        eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        inv = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        y_row = y_ptr + row.to(tl.int64) * N
        for start in tl.range(0, N, CHUNK, num_stages=STAGES):
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def _softmax_looped(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, stride_x: tl.tensor, N: tl.constexpr,
                    CHUNK: tl.constexpr, STAGES: tl.constexpr, LOG2E: tl.constexpr) -> None:
    cols = tl.arange(0, CHUNK)
    row = tl.program_id(0)
    while row < M:
        x_row = x_ptr + row.to(tl.int64) * stride_x
        # Per lane: running max (base-2 scaled) and running sum of 2^(x - max); a lane that has seen only -inf
        # keeps (-inf, 0).
        m_lane = tl.full((CHUNK,), float("-inf"), dtype=tl.float32)
        s_lane = tl.zeros((CHUNK,), dtype=tl.float32)
        for start in tl.range(0, N, CHUNK, num_stages=STAGES):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf"),
                        eviction_policy="evict_last").to(tl.float32) * LOG2E
            m_new = tl.maximum(m_lane, x)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s_lane = s_lane * tl.exp2(m_lane - m_safe) + tl.exp2(x - m_safe)
            m_lane = m_new
        m = tl.max(m_lane, axis=0)
        inv = 1.0 / tl.sum(s_lane * tl.exp2(m_lane - m), axis=0)
        y_row = y_ptr + row.to(tl.int64) * N
        for start in tl.range(0, N, CHUNK, num_stages=STAGES):
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"),
                        eviction_policy="evict_first").to(tl.float32) * LOG2E
            tl.store(y_row + start + cols, (tl.exp2(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


def _programs(x: torch.Tensor, programs_per_sm: int) -> int:
    """Persistent grid: programs_per_sm per SM, fewer if the rows in flight would overflow the L2 budget."""
    m, n = x.shape
    in_l2 = max(1, L2_BUDGET_BYTES // (n * x.element_size()))
    return max(1, min(m, programs_per_sm * _num_sms(x.device), in_l2))


def rms_norm_looped(x: torch.Tensor, weight: torch.Tensor, eps: float, chunk: int, warps: int, stages: int,
                    programs_per_sm: int = 2, y: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dim of a 2-D x with unit column stride: the looped, pipelined design."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    _rms_norm_looped[(_programs(x, programs_per_sm),)](x, weight, y, m, x.stride(0), eps, N=n, CHUNK=chunk,
                                                         STAGES=stages, num_warps=warps)
    return y


def softmax_looped(x: torch.Tensor, chunk: int, warps: int, stages: int, programs_per_sm: int = 2,
                   y: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dim of a 2-D x with unit column stride: the looped, pipelined design."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    _softmax_looped[(_programs(x, programs_per_sm),)](x, y, m, x.stride(0), N=n, CHUNK=chunk, STAGES=stages,
                                                        LOG2E=_LOG2E, num_warps=warps)
    return y


__all__ = ["L2_BUDGET_BYTES", "rms_norm_looped", "softmax_looped"]
