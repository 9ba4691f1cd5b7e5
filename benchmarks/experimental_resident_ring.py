"""Experiment, not shipped (yet): the resident softmax kernel on a ring of shared-memory slots that holds more than
one row, so the next row's copies start when a row's stats pass starts, not only as its output pass frees slots.

Why: the shipped resident kernel refills a slot with the next row's chunk as its output pass reads it, so every
copy is issued during an output pass; once they land, a stats pass (pure arithmetic on shared memory) leaves HBM idle
for that SM, and with every SM running rows of equal size the stats passes line up (half the programs started a
little late: +2.5 to +4 points at 65536 and 98304 wide, evidence/h200/2026-12-01_stagger_prefetch/). The register
kernel that reaches 90% at 32768 wide issues the whole next row as it starts a row. Here the ring has NS >= NCHUNK
slots: a row's chunk c sits in slot (base + c) % NS; as a row's stats pass begins, the next row's first L = NS -
NCHUNK chunks are copied into the free slots, the rest as the output pass frees theirs (L = NCHUNK: a double
buffer, no refills in the output pass). Copy groups are still committed in chunk order, so the stats pass waits
with a constant count (NCHUNK - 1 - c + L). Aligned contiguous rows that fit the budget only (no REALIGN, no streamed
chunks). Timed by `kernel_sweep.py --only softmax_resident_ring`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from resident_common import _chunk_offsets, _row_shift, _running_stats
from sweep_common import Trial
from sweep_resident import _correct, inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

from kernelproof_core.kernels import softmax
from kernelproof_core.kernels.softmax import _LOG2E, _fetch, _stagger


@gluon.jit
def _softmax_ring(x_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor, stride_x: gl.tensor,
                  NCHUNK: gl.constexpr, NS: gl.constexpr, K: gl.constexpr, STAGGER: gl.constexpr = 0) -> None:
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W
    CHUNK: gl.constexpr = T * K
    L: gl.constexpr = NS - NCHUNK  # the next row's chunks copied as a row's stats pass starts
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    smem_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NS, T, K], smem_layout)
    N = (N // K) * K  # the host guarantees K divides N and the stride
    stride_x = (stride_x // K) * K
    offs = _chunk_offsets(T, K, layout)
    if STAGGER > 0:
        _stagger(STAGGER, rows_layout)
    step = gl.num_programs(0)
    row = gl.program_id(0)
    x_row = x_ptr + row.to(gl.int64) * stride_x
    for c in gl.static_range(NCHUNK):
        _fetch(buf.index(c), x_row, c * CHUNK + offs, N, row < M, c == NCHUNK - 1, c * CHUNK + offs < N)
    base = row * 0  # slot of this row's chunk 0
    while row < M:
        ahead = row + step
        a_row = x_ptr + ahead.to(gl.int64) * stride_x
        nbase = (base + NCHUNK) % NS
        for c in gl.static_range(L):
            _fetch(buf.index((nbase + c) % NS), a_row, c * CHUNK + offs, N, ahead < M, c == NCHUNK - 1,
                   c * CHUNK + offs < N)
        m_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
        s_t = gl.zeros([T], gl.float32, rows_layout)
        for c in gl.static_range(NCHUNK):
            cp.wait_group(NCHUNK - 1 - c + L)
            x = buf.index((base + c) % NS).load(layout).to(gl.float32)
            if c == NCHUNK - 1:
                x = gl.where(c * CHUNK + offs < N, x, float("-inf"))  # masked copies zero-fill
            m_t, s_t = _running_stats(m_t, s_t, x)
        shift = _row_shift(m_t, s_t)
        y_row = y_ptr + row.to(gl.int64) * N
        for c in gl.static_range(NCHUNK):
            slot = buf.index((base + c) % NS)
            x = slot.load(layout).to(gl.float32)
            if c + L < NCHUNK:  # the slot is free: the next row's chunk c + L (past the last row: no traffic)
                _fetch(slot, a_row, (c + L) * CHUNK + offs, N, ahead < M, c + L == NCHUNK - 1,
                       (c + L) * CHUNK + offs < N)
            y = gl.exp2(x * _LOG2E - shift).to(y_ptr.dtype.element_ty)
            if c == NCHUNK - 1:
                gl.store(y_row + c * CHUNK + offs, y, mask=c * CHUNK + offs < N)
            else:
                gl.store(y_row + c * CHUNK + offs, y)
        base = nbase
        row = ahead
    cp.wait_group(0)


def launch(x: torch.Tensor, y: torch.Tensor, programs: int, warps: int, lookahead: int, stagger: int = 0) -> object:
    """Softmax of a contiguous 16-bit x (width a multiple of 8) into y on `programs` persistent programs of `warps`
    warps, `lookahead` chunks of the next row copied as a row's stats pass starts; returns the kernel."""
    m, n = x.shape
    k = 16 // x.element_size()
    n_chunks = -(-n // (32 * warps * k))
    return _softmax_ring[(min(m, programs),)](x, y, m, n, x.stride(0), NCHUNK=n_chunks, NS=n_chunks + lookahead,
                                              K=k, STAGGER=stagger, num_warps=warps)


SHAPES = ((2048, 32000), (4096, 32768), (1024, 40000), (1024, 50000), (1024, 65536), (683, 98304))


def softmax_resident_ring_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """kernel_sweep.py family `softmax_resident_ring`: the ring kernel over warps, programs per SM, lookahead and
    stagger, each config checked against fp32 before it is timed, beside the built-in's planned launch."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    budget = softmax._resident_budget(smem)
    for m, n in SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for warps, per_sm in ((8, 2), (16, 1), (32, 1)):  # 8 warps alone trail (sweep_resident.py)
            chunk_bytes = 32 * warps * 16
            n_chunks = -(-n // (chunk_bytes // x.element_size()))
            room = min(n_chunks, budget // per_sm // chunk_bytes - n_chunks)
            if room < 0:
                continue
            for lookahead in sorted({0, room // 2, room}):
                for stagger in (0, 2500) if per_sm == 1 else (0,):
                    label = f"warps={warps} per_sm={per_sm} lookahead={lookahead}/{n_chunks} stagger={stagger}"
                    run = partial(launch, x, y, per_sm * sms, warps, lookahead, stagger)
                    y.fill_(float("nan"))
                    run()
                    if _correct(y, ref, f"softmax.resident_ring {m}x{n} {label}"):
                        yield ("softmax.resident_ring", (m, n), label, run, moved, False)
