"""Built-in rms_norm candidate: y = x * rsqrt(mean(x^2) + eps) * weight; FP32 statistics, cast on store.

RMSNorm is memory-bound (one read of x, one write of y; weight is tiny and stays in cache), so the design
is about moving enough bytes per program with full-width vector accesses:
  * rows that fit in registers are normalised in one pass; narrow rows are packed several to a program (a
    2-D tile of about 8192 elements, 16 KB of bf16) so short rows still give each program real work, and
    weight is loaded once per program rather than once per row. 16-bit rows of 1024-8192 elements re-read their
    tile for the scaling pass instead of holding it across the reduction (_reread_plan): fewer registers, more
    programs in flight, 90-103% of copy bandwidth on the H200. Unaligned 16-bit rows of 1025-2041 and 2048-16377
    (rows start mid-vector) are seen through the output's vector window instead (_rms_norm_realigned): vector
    accesses, the two edge vectors apart; H200 55-73% of copy where scalar accesses reached 40-60%;
  * wider rows, on a GPU (split path): one program per chunk of a row holds its chunk in registers, publishes
    its sum of squares on a per-row counter and waits for its siblings: one HBM read and one write, and many small
    programs per SM. On the H200 it beat the looped path below on every wide case swept (345 x 64803: 28% -> 40%
    of copy bandwidth, 1024 x 40000: 51% -> 63%; benchmarks/kernel_sweep.py --only rms_norm_wide). 16-bit rows off
    the 16-byte grid are split through their vector windows (REALIGN: 49-57% of copy against 38-45% scalar);
  * 16-bit rows off the 16-byte grid wider than 24576, on a GPU (two-phase path): each chunk is read twice, for its
    sum of squares and, while still in L2, to scale it, on a persistent grid walking rows in batches; nobody waits
    with a chunk held (H200: 57-70% of copy where the split reached 52-64%, 20-480 MB moved);
  * 16-bit rows wider than 32768 that a whole row an SM can hold in shared memory (with REALIGN for rows off the
    16-byte grid), where rows fill at least _RESIDENT_MIN_FILL of their last round of SMs (resident path,
    _rms_norm_resident, Gluon): one 32-warp program an SM keeps its row in shared memory, copied in by cp.async as
    the previous row is written, so x is read once from HBM and nobody waits on another program;
  * otherwise (the interpreter, or rows with more chunks than SMs) wider rows loop over chunks twice (sum of
    squares, then scale) on a persistent grid sized so that the rows in flight fit in L2, so the second read of a
    row comes from L2, not HBM.
Configs come from a fixed heuristic, not autotuning: the first call is cheap and every run picks the same
kernel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

# Widest row held in registers: 32768 16-bit values (with the weight, 64 registers per thread at 32
# warps). FP32 rows, and rows whose accesses cannot be vectorised (a 64-bit address per element), spill
# beyond half that.
_MAX_FUSED_N, _MAX_FUSED_N_NARROW = 32768, 16384
_TILE = 8192  # elements per program for the fused path
_REREAD_MIN_N, _REREAD_MAX_N = 1024, 8192  # padded row widths where the re-reading row kernel was measured
_REREAD_TILE = 4096  # elements per program for it
_WAVES = 2  # shrink tiles until the grid covers this many programs per SM
# Programmatic dependent launch with its wait, on the row kernel (sm_90 on, compiled) where a call moves at least
# _PDL_MIN_BYTES: each program lets the next launch start as it begins and waits (gdc_wait) before it reads
# anything, so back-to-back calls hide the launch and the first wave's scheduling behind the previous call's last
# wave, never its memory traffic. H100, bf16, through the harness's timing (benchmarks/dependent_launch_gain.py,
# evidence/h100/2026-12-05_dependent_launch/1_*): 4096 x 1024 6.66 us against 7.25, 2048 x 4096 12.65 against
# 13.41, 8192 x 2880 32.96 against 33.42 (gpt_oss_2880, 0.09 us short of 90% of copy on the H200), 8192 x 8192
# 89.96 against 90.81; 4096 x 127 (2 MB) 3.95 against 3.03: slower under the floor.
_PDL, _PDL_MIN_BYTES = True, 8 << 20
# Wide path: rows in flight stay within this much L2 (H200: 50 MB), so pass 2 re-reads hit L2; and a
# persistent grid is used only if no program does more than this times the mean work.
_L2_BUDGET_BYTES = 32 << 20
_MAX_IMBALANCE = 1.25
# Split path: elements per program (vectorised rows / rows with scalar accesses / window positions of realigned
# rows) and warps (kernel_sweep.py; realigned: H200, bf16, CUPTI, 425 x 52717 53.4% of copy on 4096 positions
# against 47.4-48.6% on 8192 and 43.5% scalar, evidence/h200/2026-12-02_carry_rms_resident/2_*).
_SPLIT_CHUNK, _SPLIT_CHUNK_SCALAR, _SPLIT_CHUNK_REALIGNED, _SPLIT_WARPS = 8192, 4096, 4096, 4
# Two-phase path (_rms_norm_two_phase, on a GPU): 16-bit rows off the 16-byte grid at least _TWO_PHASE_MIN_N wide,
# in chunks of window positions on warps, programs an SM (at most what can be resident) and batches of x re-read from
# L2; a wait polls at most _TWO_PHASE_PATIENCE times. A batch is as many whole rows as one chunk a program covers
# (_TWO_PHASE_BATCH_BYTES = 0): in 8 MB batches 600 x 50001's 83 rows, 1079 chunks on 1056 programs, took two rounds
# a batch, the second nearly empty (46.3% of copy against the split's 56.6%, 2026-12-04_two_phase/4_*). In one round,
# H200, CUPTI, bf16 / fp16, against the realigned split (evidence/h200/2026-12-04_one_round/1_*): 289 x 65494 60.0 /
# 60.7% against 54.5 / 55.2%, 345 x 64803 63.3 / 63.3% against 55.8 / 55.5%, 600 x 50001 63.3 / 63.5% against 56.0 /
# 56.6%, 425 x 52717 62.7 / 63.0% against 56.6 / 57.4%; past the 64 MB of x the plan was capped at before, 4096 x 40003
# (328 MB) 69.9% against 64.1%, 2000 x 60001 70.0 against 60.1, 1024 x 50001 66.8 against 57.5 (bf16); under the
# 49153 threshold it had, 500 x 33001 58.6 against 55.0, 1000 x 40003 67.1 against 60.4, 800 x 36001 64.4 against
# 59.2, 300 x 45001 57.1 against 52.4. 4 programs an SM instead of 8 within a point either way. Narrower (bf16, 2_*):
# ahead at 512 x 32761 (61.6 against 55.5), 700 x 30001 (61.3 / 58.1), 1024 x 24577 (59.8 / 59.3), so planned from
# 24577 (7 chunks a row and more); rows of 5-6 chunks stay on the split (2000 x 20001 67.6 against 65.8, 4096 x 16393
# 61.6 against 62.4: not enough either way to plan them).
_TWO_PHASE_MIN_N = 24577
_TWO_PHASE_CHUNK, _TWO_PHASE_WARPS, _TWO_PHASE_PER_SM, _TWO_PHASE_BATCH_BYTES = 4096, 4, 8, 0
_TWO_PHASE_PATIENCE = 1 << 20
# _rms_norm_two_phase's OVERLAP (0: each chunk's loads where it is used; 1: phase 2's loads before its wait; 2: also
# phase 1's k-th chunk and phase 2's k-th in one step, both loaded before either is used). On the H100 (bf16, CUPTI,
# evidence/h100/2026-12-06_two_phase_overlap/1_*) 1 gained 0.1-2.8 points at five shapes (476 x 63343 73.2% against
# 72.2) and lost 1.4 at 1024 x 50001; 2 level with 1; the counters (3_*) show x read from DRAM once and re-read from
# L2 (DRAM reads 1.03x x), DRAM 59-62% busy, issue 51% busy: the path's limit is neither latency nor bytes. Not
# planned without an H200 sweep (family rms_norm_two_phase_overlap).
_TWO_PHASE_OVERLAP = 0
# Resident path (_rms_norm_resident): 16-bit rows wider than _RESIDENT_MIN_N, on the 16-byte grid or contiguous (then
# through their vector windows, REALIGN), one 32-warp program an SM holding its whole row in shared memory (at most
# _RESIDENT_BUDGET_BYTES: one program alone on an SM leaves a few KB of its 227 KB for the reductions), where the rows
# fill at least _RESIDENT_MIN_FILL of the SMs in their last round (a whole row a program: a last round of few rows
# leaves SMs idle, where the two-phase path's chunks spread over all of them). H100, bf16, CUPTI, planned against the
# plan without it (kernel_sweep.py --only rms_norm_resident, evidence/h100/2026-12-06_rms_resident/5_*), % of copy:
# 476 x 63343 (fill 0.90) 76.2 against 72.1 (two-phase), 345 x 64803 (0.87) 72.6 / 69.1, 1024 x 50001 (0.97) 81.8 /
# 74.7, 2000 x 60001 (0.95) 83.7 / 76.5, 512 x 100003 82.1 / 74.0, 396 x 33001 66.2 / 63.0, aligned 1024 x 65536 89.2
# / 82.4 (split), 264 x 114000 87.4 / 75.2; in the first sweep (3_*) behind at 270 x 63553 (fill 0.68: 64.5 / 67.4)
# and level at 425 x 52717 (0.80: 69.4 / 69.7); 16 warps lost 4-17 points; two programs an SM lost 1-14 where they
# stream part of the row and gained 1.3 at 40000 (two whole rows). H200 (evidence/h200/2026-12-06_rms_resident_on_h200/
# 3_*, 10_*): 476 x 63343 65.5-65.8 against 64.0-64.5, 345 x 64803 level (61.6-61.8 / 61.9), 1024 x 50001 71.5-71.9
# / 66.1-66.2, 2000 x 60001 73.9-74.0 / 68.8-68.9, 512 x 100003 72.5 / 65.7, 1024 x 65536 83.5-83.9 / 69.3-70.4
# (split), 264 x 114000 78.4-79.2 / 62.2-62.5; under the fill rule one an SM was behind (270 x 63553 53.6 / 59.6).
# Two 16-warp programs an SM where two whole rows fit _RESIDENT_PAIR_BYTES (each leaving a few KB for its reductions)
# and fill 85% of their last round of programs; one an SM otherwise. H200, bf16, planned against the shipped kernel
# one an SM (10_*): 1024 x 40000 80.6% against 78.2, 1024 x 45000 80.9 / 75.6, 1000 x 48000 80.5 / 78.5, 512 x 40001
# 65.7 / 64.0, 480 x 36001 60.0 / 58.0, 250 x 45001 57.2 / 58.3 (H100, 1024 x 40000: 88.0 / 86.8).
_RESIDENT_MIN_N, _RESIDENT_MIN_FILL, _RESIDENT_WARPS, _RESIDENT_STAGGER = 32768, 0.85, 32, 2500
# Contiguous rows off the 16-byte grid take the resident path (through windows, the same fill rule) from this width,
# under _RESIDENT_MIN_N too, where the two-phase path (from 24577) or the split ran before. H100, bf16, CUPTI, the
# rule's plan (two 16-warp programs an SM) against the two-phase / split plan (family rms_norm_resident_narrow,
# evidence/h100/2026-12-07_twenty_seventh/2_*): 510 x 32083 75.5 / 69.2%, 700 x 30001 76.5 / 68.6, 512 x 32761 76.9 /
# 70.4, 1024 x 24577 77.4 / 69.1, 2000 x 30001 84.8 / 75.7, 1024 x 20001 75.1 / 70.7 (split), 480 x 26003 69.7 /
# 62.8; 300 x 28001 fills 57% of its round (no plan by the rule) and stays two-phase (forced: 56.7 / 65.0). Not yet
# run on an H200 (wider rows there: resident ahead by 1.5-16 points, above).
_RESIDENT_WINDOWS_MIN_N = 20000
_RESIDENT_BUDGET_BYTES, _RESIDENT_RESERVE_BYTES = 224 * 1024, 4 * 1024
_RESIDENT_PAIR_BYTES, _RESIDENT_PAIR_WARPS = 200 * 1024, 16
# LINE (experiment, 0 = off; softmax.py plans it): REALIGN's windows start on a 128-byte line (64 16-bit elements)
# instead of a 16-byte vector, so a warp's 512-byte copy or store touches 4 lines, not 5. Softmax's windows on lines
# ran 4-14 points of copy ahead of windows on vectors on the H100 (evidence/h100/2026-12-06_seventeenth/1_*); here
# (family rms_norm_resident_line, H100, bf16, 7_*) mixed: +0.2 to +0.6 at 372 x 46501, 476 x 63343, 345 x 64803,
# -0.4 to -1.6 at 1024 x 50001, 2000 x 60001, 512 x 100003, 425 x 52717, 400 x 40001. Off.
_RESIDENT_LINE = 0
# TABLE_PDL (experiment, off): the shifted weight table is its own launch before the resident kernel, about 2.6
# points of copy at 372 x 46501 on the H100 (the kernel timed with and without it, evidence/h100/
# 2026-12-06_seventeenth/6_*). With TABLE_PDL the table kernel releases its dependents as it starts and the resident
# kernel is launched with programmatic dependent launch: it issues its first row's copies (x, final before the table
# kernel began: that launch is an ordinary one) and waits for the table (griddepcontrol.wait) before anything else,
# so the table's time hides behind the first row's reads. Family rms_norm_resident_pdl (H100, bf16, 9_*): level at
# 7 shapes (-0.3 to +0.3 points), -3.8 at 400 x 40001 (two an SM): it does not hide (the resident kernel takes a
# whole SM's shared memory, so it waits for the table's programs to leave). Off; correct (8_*: the same bytes).
_RESIDENT_TABLE_PDL = False
# WSMEM (experiment, off): the resident kernel keeps the weight of as many of a row's chunks as the SM's shared memory
# leaves room for (WS) in shared memory, staged once a program, instead of reading it from L2 with every row; through
# windows each program takes the rows of one shift class (PERIOD), whose table row it stages. Family
# rms_norm_resident_wsmem. WSHIFT (with WSMEM where the whole row's weight fits, through windows): no shifted table and
# no table launch; each program shifts w in registers once as it stages it.
_RESIDENT_WSMEM, _RESIDENT_WSHIFT = False, False
# Planned (H100, CUPTI, evidence/h100/2026-12-06_eighteenth/1_*, 2_*): WSMEM on rows on the 16-byte grid whose weight
# does not wholly fit beside the rows (0 < WS < NCHUNK: nor in what L1 keeps): bf16 / fp16 1024 x 65536 91.4 / 92.3%
# of copy against 88.9 / 89.3, 1024 x 40000 (two an SM) 93.3 / 93.6 against 89.3 / 90.2, 300 x 45000 level; where it
# all fits (396 x 40000, 80 KB) staging lost 1.6-2.2 points, and through windows (shift classes) 0.5-3 points.
# Nineteenth session, the same family on 8 more aligned shapes (H100, bf16, evidence/h100/2026-12-06_nineteenth/2_*):
# ahead where a program takes 3 rows or more (2048 x 40000 93.5 / 88.4, 792 x 40000 93.0 / 89.3, 2048 x 65536 93.9
# / 89.1; 600 x 56000, whose weight all fits, 84.6 / 83.8; 512 x 65536 level), behind where it takes fewer (264 x
# 65536, 2 rows a program, 82.5 / 86.2; 120 x 100000, one, 74.6 / 76.3; 300 x 45000 level): staging costs a program
# once, so it needs rows to pay for it. Planned from _RESIDENT_WSMEM_MIN_ROWS rows a program (1024 x 32776, 3.9 a
# program, lost 2.2 all the same).
_RESIDENT_WSMEM_PARTIAL, _RESIDENT_WSMEM_MIN_ROWS = True, 3
# RING: two sets of row slots a program where two whole rows fit its share (and no weight is staged), so a row's copies
# are in flight while the row before it waits on its own (_rms_norm_resident); RING_LAZY: the second row's copies go
# out once the first row's sum is in. Aimed at the few rows a program of the hidden_wide draws (372 x 46501: 3 rows a
# program, 72.4% of copy on the H100 against 92.9 at 792 x 40000's 6). Family rms_norm_resident_ring, H100, CUPTI,
# one program an SM, plain / RING / RING_LAZY, bf16 then fp16 (evidence/h100/2026-12-07_twenty_third/12_*, 13_*):
# behind through windows at every shape (372 x 46501 72.2 / 68.2 / 67.5, 425 x 52717 70.1 / 67.2 / 65.4, 1024 x
# 50001 82.4 / 81.8 / 78.8), behind on aligned 300 x 45000 (70.2 / 65.0 / 67.2), ahead on aligned rows where the plan
# takes one program an SM: 396 x 40000 81.0 / 85.3 / 86.6 (fp16 82.0 / 86.3 / 86.4; planned 81.8 / 81.9), 600 x
# 56000 84.6 / 84.2 / 87.6 (fp16 84.8 / 84.1 / 88.0; planned 84.4 / 85.1). So RING_LAZY is planned there
# (_RESIDENT_RING_ALIGNED: rows on the 16-byte grid, one program an SM, more rows than programs (a program with one
# row has nothing to overlap), no weight staged; 300 x 45000 takes the split path, 270-425 of any width do not fill
# their round); RING alone everywhere it fits stays an experiment. Not yet run on an H200.
# Where the plan takes two programs an SM it beats RING_LAZY's one (1024 x 40000 91.6 / 89.7, 792 x 40000 92.5 /
# 91.3) or is within 1.5 points of it (1000 x 48000 89.0 / 90.1, 1024 x 32776 86.1 / 86.7): left as planned.
_RESIDENT_RING, _RESIDENT_RING_ALIGNED = False, True
# WIDEN (experiment, off; _f32): bf16 widened by a shift and a mask a pair instead of Triton's PRMT + SHF. Family
# rms_norm_resident_widen.
_RESIDENT_WIDEN = False
# Hopper SM limits for the resident-program count: registers, threads, programs, shared memory (bytes).
_SM_REGISTERS, _SM_THREADS, _SM_PROGRAMS, _SM_SHARED = 65536, 2048, 32, 228 * 1024
# 16-bit rows whose width is not a multiple of 8, this many elements and more, in windows up to this wide, take the
# realigned kernel; so do narrower ones whose window is _REALIGNED_NARROW_WINDOW lanes, on _REALIGNED_NARROW_WARPS
# (H200, bf16, CUPTI: 32768 x 1027 64.7% of copy on 2 warps against 58.5% scalar on the row kernel; on 4-8 warps the
# realigned kernel lost 3 points, evidence/h200/2026-12-02_owed_checks/2_tma_probe_rms_parts/).
_REALIGNED_MIN_N, _REALIGNED_MAX_WINDOW = 2048, 16384
_REALIGNED_NARROW_MIN_N, _REALIGNED_NARROW_WINDOW, _REALIGNED_NARROW_WARPS = 1025, 2048, 2
_MIN_PART = 1024  # smallest part of a realigned window: the vectors of 4 warps
# Short 16-bit rows (padded to 128-1024 lanes, not taken by the re-read plan; 128-256 where accesses are scalar):
# re-read, on tiles of _SHORT_SCALAR_TILE elements on one warp where accesses are scalar, else of _SHORT_TILE (rows
# up to 256 lanes) or _SHORT_WIDE_TILE elements at _SHORT_PER_THREAD a thread (H200, bf16, CUPTI, `--only
# rms_norm_small_rows`). Scalar rows of 512 lanes keep the tile rule: on one warp the campaign's 1061 x 333 took
# 2.31 us kernel time against 2.25 (evidence/h200/2026-12-02_in_vec_table/5_*).
_SHORT_MIN_LANES, _SHORT_MAX_LANES, _SHORT_SCALAR_MAX_LANES = 128, 1024, 256
_SHORT_SCALAR_TILE, _SHORT_TILE, _SHORT_WIDE_TILE, _SHORT_PER_THREAD = 1024, 2048, 4096, 16
_CPU_SMS = 132  # H200 SM count; used only to size grids when there is no CUDA device (interpreter)


@functools.cache
def _cuda_sms(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
    return _CPU_SMS


def _align(elsize: int, *values: int) -> int:
    """Largest power of two (at most one 16-byte vector) that divides every value, in elements."""
    a = max(1, 16 // elsize)
    while a > 1 and any(v % a for v in values):
        a //= 2
    return a


def _warps(tile: int) -> int:
    """About 32 elements per thread: enough loads in flight, few enough registers to never spill."""
    return min(32, max(4, tile // 1024))


@triton.jit
def _rms_norm_rows(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                   stride_x: tl.tensor, eps: tl.tensor, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   ALIGN: tl.constexpr, EVEN: tl.constexpr = False, REREAD: tl.constexpr = False,
                   STREAM: tl.constexpr = False, PDL: tl.constexpr = False) -> None:
    # The host guarantees ALIGN divides N and the row stride; spelling that out lets the compiler vectorise
    # the masked accesses even when N is not a multiple of 16.
    # EVEN (the host guarantees N == BLOCK_N and BLOCK_M divides M): no masks and no row clamping at all.
    # REREAD: the tile is loaded twice, once for the sum of squares (kept in L2) and again to scale it (the second
    # read served by L1/L2, then evicted first), instead of being held in registers across the reduction: fewer
    # registers per thread, more programs per SM in flight (torch.compile's rms_norm does the same).
    # STREAM: y is written with streaming stores (.cs), which do not displace other lines in L2.
    # PDL (launched with launch_pdl, _PDL): release the next launch, then wait for the previous kernel's writes.
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    cols = tl.arange(0, BLOCK_N)
    if EVEN:
        rows = tl.arange(0, BLOCK_M)
        x_ptrs = x_ptr + row0 * stride_x + rows[:, None] * stride_x + cols[None, :]
        x = tl.load(x_ptrs, eviction_policy="evict_last" if REREAD else "").to(tl.float32)
        w = tl.load(w_ptr + cols).to(tl.float32)
    else:
        # Rows past the end re-read the last row (harmless, cached) so loads need only the column mask.
        rows = tl.minimum(tl.arange(0, BLOCK_M), (M - 1 - row0).to(tl.int32))
        col_mask = cols < N
        x_ptrs = x_ptr + row0 * stride_x + rows[:, None] * stride_x + cols[None, :]
        x = tl.load(x_ptrs, mask=col_mask[None, :], other=0.0,
                    eviction_policy="evict_last" if REREAD else "").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    if REREAD:
        if EVEN:
            x = tl.load(x_ptrs, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(x_ptrs, mask=col_mask[None, :], other=0.0, eviction_policy="evict_first").to(tl.float32)
    y = x * inv[:, None] * w[None, :]
    y_ptrs = y_ptr + row0 * N + rows[:, None] * N + cols[None, :]
    if EVEN:
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), cache_modifier=".cs" if STREAM else "")
    else:
        store_mask = (tl.arange(0, BLOCK_M) < M - row0)[:, None] & col_mask[None, :]
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=store_mask, cache_modifier=".cs" if STREAM else "")


@triton.jit
def _edges(shift: tl.tensor, N: tl.tensor, VEC: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    # Window offsets (2 x VEC) of a row's first and last vectors, and the mask of the row's elements in them that the
    # big tile does not hold (N > VEC: the two never coincide). The same helper as softmax.py's: a candidate is one
    # file, so it cannot import it.
    start = tl.where(tl.arange(0, 2)[:, None] == 0, 0, ((shift + N - 1) // VEC) * VEC)
    offs = start + tl.arange(0, VEC)[None, :]
    inside = (start >= shift) & (start + VEC <= shift + N)
    return offs, (offs >= shift) & (offs < shift + N) & ~inside


@triton.jit
def _part(START: tl.constexpr, SIZE: tl.constexpr, VEC: tl.constexpr, shift: tl.tensor,
          N: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    # Offsets (SIZE // VEC x VEC) of window positions START .. START + SIZE, and the mask of the vectors wholly
    # inside the row (masked per vector, so loads and stores stay 16 bytes wide).
    vecs = START + tl.arange(0, SIZE // VEC) * VEC
    return vecs[:, None] + tl.arange(0, VEC)[None, :], ((vecs >= shift) & (vecs + VEC <= shift + N))[:, None]


@triton.jit
def _w_ptrs(w_ptr: tl.tensor, offs: tl.tensor, shift: tl.tensor, WT: tl.constexpr) -> tl.tensor:
    # A realigned row's weight at window positions `offs`: row `shift` of a table of the weight shifted by 0-7
    # (_weight_table), read 16 bytes wide (WT = the table's row length; planned: H200, bf16, CUPTI, table kernel
    # included, +0.9 to +8.5 points of copy over WT = 0 at 10 of 11 shapes, -1.0 at the 11th;
    # evidence/h200/2026-12-02_in_vec_table/1_*); w[offs - shift], misaligned, read element by element (WT = 0,
    # before); or the same from w - shift, one scalar subtraction instead of one an element (WT = -1: sm_90 builds
    # 13-19% fewer instructions, about half the table's gain).
    if WT > 0:
        return w_ptr + (offs + shift * WT)
    elif WT < 0:
        return (w_ptr - shift) + offs
    else:
        return w_ptr + (offs - shift)


@triton.jit
def _rms_norm_weight_table(w_ptr: tl.tensor, t_ptr: tl.tensor, N: tl.tensor, zero_ptr: tl.tensor, Z: tl.tensor,
                           WT: tl.constexpr, BLOCK: tl.constexpr, RELEASE: tl.constexpr = False) -> None:
    # Row s of the table is the weight as a row starting s elements into a vector sees it: t[s, p] = w[p - s]. The
    # programs also zero Z int32s at zero_ptr (the split path's row counters; Z = 0: none), one launch fewer than a
    # separate fill before the split kernel. RELEASE (TABLE_PDL): the next launch (the resident kernel, launched with
    # programmatic dependent launch) may start at once; it waits for this grid before it reads the table.
    if RELEASE:
        tl.extra.cuda.gdc_launch_dependents()
    s = tl.program_id(0)
    p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tl.store(t_ptr + s * WT + p, tl.load(w_ptr + (p - s), mask=(p >= s) & (p - s < N), other=0.0), mask=p < WT)
    q = s * tl.num_programs(1) + tl.program_id(1)
    for at in range(q * BLOCK, Z, 8 * tl.num_programs(1) * BLOCK):  # 8: the grid's rows, one a shift (_weight_table)
        z = at + tl.arange(0, BLOCK)
        tl.store(zero_ptr + z, tl.zeros((BLOCK,), dtype=tl.int32), mask=z < Z)


@triton.jit
def _rms_norm_realigned(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                        stride_x: tl.tensor, eps: tl.tensor, WINDOW: tl.constexpr, VEC: tl.constexpr,
                        ALIGN_X: tl.constexpr, REREAD: tl.constexpr, PART1: tl.constexpr = 0,
                        PART2: tl.constexpr = 0, WT: tl.constexpr = 0) -> None:
    # 16-bit rows whose width is not a multiple of the 16-byte vector: addressed row by row, every access is scalar
    # (H200: 50% of copy at 3124 x 5999). One row per program, seen through the window of whole vectors of y that
    # covers it (y is contiguous, so a row starts mid-vector): the big tiles hold the vectors lying wholly inside the
    # row, a 2 x VEC tile the row's part of its two edge vectors. The window is cut in up to three power-of-two parts
    # (WINDOW, PART1, PART2; 0: none; _parts), so a row of 5999 spans 6144 lanes, not 8192. x is read at the same
    # window positions (vectorised as far as ALIGN_X, a power of two dividing stride_x - N); the weight at window
    # position p is w[p - shift], a misaligned read served by L1 (12 KB). REREAD: x read again for the scaling pass
    # (from L1/L2) instead of held across the reduction.
    START2: tl.constexpr = WINDOW + PART1
    row = tl.program_id(0)
    start = row.to(tl.int64) * N
    base = (start // VEC) * VEC
    shift = (start - base).to(tl.int32)  # where the row begins inside its first vector
    x_at = x_ptr + ((row.to(tl.int64) * (stride_x - N) + base) // ALIGN_X) * ALIGN_X  # x at window position 0
    hint: tl.constexpr = "evict_last" if REREAD else ""
    offs, whole = _part(0, WINDOW, VEC, shift, N)
    e_offs, e_mask = _edges(shift, N, VEC)
    x = tl.load(x_at + offs, mask=whole, other=0.0, eviction_policy=hint).to(tl.float32)
    x_e = tl.load(x_at + e_offs, mask=e_mask, other=0.0).to(tl.float32)
    total = tl.sum(tl.sum(x * x, axis=1), axis=0) + tl.sum(tl.sum(x_e * x_e, axis=1), axis=0)
    if PART1 > 0:
        offs1, whole1 = _part(WINDOW, PART1, VEC, shift, N)
        x1 = tl.load(x_at + offs1, mask=whole1, other=0.0, eviction_policy=hint).to(tl.float32)
        total += tl.sum(tl.sum(x1 * x1, axis=1), axis=0)
    if PART2 > 0:
        offs2, whole2 = _part(START2, PART2, VEC, shift, N)
        x2 = tl.load(x_at + offs2, mask=whole2, other=0.0, eviction_policy=hint).to(tl.float32)
        total += tl.sum(tl.sum(x2 * x2, axis=1), axis=0)
    inv = tl.rsqrt(total / N + eps)
    y_at = y_ptr + base
    if REREAD:
        x = tl.load(x_at + offs, mask=whole, other=0.0, eviction_policy="evict_first").to(tl.float32)
    w = tl.load(_w_ptrs(w_ptr, offs, shift, WT), mask=whole, other=0.0).to(tl.float32)
    tl.store(y_at + offs, (x * inv * w).to(y_ptr.dtype.element_ty), mask=whole)
    w_e = tl.load(_w_ptrs(w_ptr, e_offs, shift, WT), mask=e_mask, other=0.0).to(tl.float32)
    tl.store(y_at + e_offs, (x_e * inv * w_e).to(y_ptr.dtype.element_ty), mask=e_mask)
    if PART1 > 0:
        if REREAD:
            x1 = tl.load(x_at + offs1, mask=whole1, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w1 = tl.load(_w_ptrs(w_ptr, offs1, shift, WT), mask=whole1, other=0.0).to(tl.float32)
        tl.store(y_at + offs1, (x1 * inv * w1).to(y_ptr.dtype.element_ty), mask=whole1)
    if PART2 > 0:
        if REREAD:
            x2 = tl.load(x_at + offs2, mask=whole2, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w2 = tl.load(_w_ptrs(w_ptr, offs2, shift, WT), mask=whole2, other=0.0).to(tl.float32)
        tl.store(y_at + offs2, (x2 * inv * w2).to(y_ptr.dtype.element_ty), mask=whole2)


@triton.jit
def _rms_norm_wide(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                   stride_x: tl.tensor, eps: tl.tensor, CHUNK: tl.constexpr, ALIGN: tl.constexpr,
                   EVICT: tl.constexpr = False) -> None:
    # Persistent over rows: the host launches only as many programs as keeps the rows in flight within L2,
    # so pass 2 re-reads each row from L2 instead of HBM.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    cols = tl.arange(0, CHUNK)
    # while, not range(): Triton 3.6's interpreter cannot iterate range() over a runtime bound under
    # NumPy 2.x, and the compiled loop is the same.
    row = tl.program_id(0)
    while row < M:
        x_row = x_ptr + row.to(tl.int64) * stride_x
        y_row = y_ptr + row.to(tl.int64) * N
        acc = tl.zeros((CHUNK,), dtype=tl.float32)  # per-lane partial sums; one tree reduction at the end
        start = 0
        while start < N:
            # EVICT (swept by benchmarks/kernel_sweep.py, as torch.compile's looped reductions do): keep the row in L2
            # for pass 2, then let pass 2's reads go first.
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0,
                        eviction_policy="evict_last" if EVICT else "").to(tl.float32)
            acc += x * x
            start += CHUNK
        inv = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        start = 0
        while start < N:
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=0.0,
                        eviction_policy="evict_first" if EVICT else "").to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)
            start += CHUNK
        row += tl.num_programs(0)


@triton.jit
def _chunk_window(x_ptr: tl.tensor, N: tl.tensor, stride_x: tl.tensor, row: tl.tensor, part: tl.tensor,
                  CHUNK: tl.constexpr, ALIGN: tl.constexpr) -> tuple[tl.tensor, ...]:
    # Chunk `part` of a 16-bit row off the 16-byte grid, cut from the window of y's whole vectors that covers the row
    # (_rms_norm_realigned's view): x at window position 0 (vectorised as far as ALIGN, a power of two dividing
    # stride_x - N), the chunk's offsets and the mask of its vectors wholly inside the row, the row's edge vectors
    # (their elements outside those, part 0 only), where y's window begins and the row's shift inside its first vector.
    VEC: tl.constexpr = 8
    start = row.to(tl.int64) * N
    base = (start // VEC) * VEC
    shift = (start - base).to(tl.int32)
    x_at = x_ptr + ((row.to(tl.int64) * (stride_x - N) + base) // ALIGN) * ALIGN
    vecs = part * CHUNK + tl.arange(0, CHUNK // VEC) * VEC
    offs = vecs[:, None] + tl.arange(0, VEC)[None, :]
    mask = ((vecs >= shift) & (vecs + VEC <= shift + N))[:, None]
    e_offs, e_mask = _edges(shift, N, VEC)
    return x_at, offs, mask, e_offs, e_mask & (part == 0), base, shift


@triton.jit
def _chunk_load(x_at: tl.tensor, offs: tl.tensor, mask: tl.tensor, e_offs: tl.tensor, e_mask: tl.tensor,
                HINT: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    # A window chunk (_chunk_window) and its edge elements, in fp32.
    x = tl.load(x_at + offs, mask=mask, other=0.0, eviction_policy=HINT).to(tl.float32)
    return x, tl.load(x_at + e_offs, mask=e_mask, other=0.0).to(tl.float32)


@triton.jit
def _squares(x: tl.tensor, x_e: tl.tensor) -> tl.tensor:
    return tl.sum(tl.sum(x * x, axis=1), axis=0) + tl.sum(tl.sum(x_e * x_e, axis=1), axis=0)


@triton.jit
def _chunk_weights(w_ptr: tl.tensor, offs: tl.tensor, mask: tl.tensor, e_offs: tl.tensor, e_mask: tl.tensor,
                   shift: tl.tensor, WT: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    # The weight at a window chunk's positions and its edge elements (_chunk_window), at p - shift.
    w = tl.load(_w_ptrs(w_ptr, offs, shift, WT), mask=mask, other=0.0)
    return w, tl.load(_w_ptrs(w_ptr, e_offs, shift, WT), mask=e_mask, other=0.0)


@triton.jit
def _chunk_store(y_ptr: tl.tensor, x: tl.tensor, x_e: tl.tensor, w: tl.tensor, w_e: tl.tensor, inv: tl.tensor,
                 offs: tl.tensor, mask: tl.tensor, e_offs: tl.tensor, e_mask: tl.tensor, base: tl.tensor,
                 STORE: tl.constexpr) -> None:
    # y = x * inv * w over a window chunk and its edge elements (_chunk_window, _chunk_weights).
    y_at = y_ptr + base
    tl.store(y_at + offs, (x * inv * w.to(tl.float32)).to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=STORE)
    tl.store(y_at + e_offs, (x_e * inv * w_e.to(tl.float32)).to(y_ptr.dtype.element_ty), mask=e_mask)


@triton.jit
def _rms_norm_split(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor,
                    N: tl.tensor, stride_x: tl.tensor, eps: tl.tensor, n_parts: tl.tensor, CHUNK: tl.constexpr,
                    BLOCK_S: tl.constexpr, ALIGN: tl.constexpr, REALIGN: tl.constexpr = False,
                    WT: tl.constexpr = 0) -> None:
    # One program per chunk of a row, the chunk held in registers from load to store: publish its sum of squares on
    # the row's counter (release), wait until every chunk of the row has (acquire), then scale and store. HBM sees
    # one read and one write. Waiting on programs with higher ids is safe on a GPU that starts programs in launch
    # order as long as one row's programs fit on it at once; the interpreter runs programs one after another, so
    # the host never picks this there (like softmax's split path).
    # REALIGN (16-bit rows whose width is not a multiple of 8): chunks are cut from the window of y's whole vectors
    # that covers the row, as _rms_norm_realigned sees rows: 16-byte accesses for the vectors wholly inside the row
    # (masked per vector), the row's part of its two edge vectors element by element in part 0; x at the same window
    # positions (vectorised as far as ALIGN, a power of two dividing stride_x - N), the weight at p - shift.
    # The weight is loaded after the rendezvous: loaded before it (so its latency overlaps the wait) the kernel lost
    # 0.8-7.4 points on 10 of 11 shapes (H200, evidence/h200/2026-12-02_pending_runs/1_*).
    pid = tl.program_id(0)
    row = pid // n_parts
    part = pid % n_parts
    if REALIGN:
        x_at, offs, mask, e_offs, e_mask, base, shift = _chunk_window(x_ptr, N, stride_x, row, part, CHUNK, ALIGN)
        x, x_e = _chunk_load(x_at, offs, mask, e_offs, e_mask, "")
        sq_part = _squares(x, x_e)
    else:
        N = (N // ALIGN) * ALIGN
        stride_x = (stride_x // ALIGN) * ALIGN
        cols = part * CHUNK + tl.arange(0, CHUNK)
        mask = cols < N
        x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        sq_part = tl.sum(x * x, axis=0)
    at = part_ptr + row.to(tl.int64) * n_parts
    tl.store(at + part, sq_part)
    tl.debug_barrier()  # every thread's stores are ordered before the release below
    tl.atomic_add(count_ptr + row, 1, sem="release")
    while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
        pass
    tl.debug_barrier()
    slots = tl.arange(0, BLOCK_S)
    # .cg: the partials were written by other SMs; never serve them from this SM's L1. Summed in slot order: replays
    # are bit-exact.
    sq = tl.load(at + slots, mask=slots < n_parts, other=0.0, cache_modifier=".cg")
    inv = tl.rsqrt(tl.sum(sq, axis=0) / N + eps)
    if REALIGN:
        w, w_e = _chunk_weights(w_ptr, offs, mask, e_offs, e_mask, shift, WT)
        _chunk_store(y_ptr, x, x_e, w, w_e, inv, offs, mask, e_offs, e_mask, base, "")
    else:
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row.to(tl.int64) * N + cols, (x * inv * w.to(tl.float32)).to(y_ptr.dtype.element_ty),
                 mask=mask)


@triton.jit
def _row_sum_of_squares(x_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor, N: tl.tensor,
                        stride_x: tl.tensor, row: tl.tensor, n_parts: tl.tensor, CHUNK: tl.constexpr,
                        BLOCK_S: tl.constexpr, ALIGN: tl.constexpr, PATIENCE: tl.constexpr) -> tl.tensor:
    # A row's sum of squares from its chunks' partials, once its counter says all are in (acquire). Polled at most
    # PATIENCE times: past that (programs not all resident, so some partials would come only after this program
    # ends) the row's partials are recomputed here, each as phase 1 computes it, and summed in the same tree, so the
    # bits are the same whichever way they came.
    done = tl.atomic_add(count_ptr + row, 0, sem="acquire")
    polls = 0
    while (done < n_parts) & (polls < PATIENCE):
        done = tl.atomic_add(count_ptr + row, 0, sem="acquire")
        polls += 1
    tl.debug_barrier()
    slots = tl.arange(0, BLOCK_S)
    if done >= n_parts:
        # .cg: written by other SMs; never served from this SM's L1.
        sq = tl.load(part_ptr + row.to(tl.int64) * n_parts + slots, mask=slots < n_parts, other=0.0,
                     cache_modifier=".cg")
    else:
        sq = tl.zeros((BLOCK_S,), dtype=tl.float32)
        part = 0
        while part < n_parts:
            x_at, offs, mask, e_offs, e_mask, _base, _shift = _chunk_window(x_ptr, N, stride_x, row, part, CHUNK,
                                                                            ALIGN)
            x, x_e = _chunk_load(x_at, offs, mask, e_offs, e_mask, "")
            sq = tl.where(slots == part, _squares(x, x_e), sq)
            part += 1
    return tl.sum(sq, axis=0)


@triton.jit
def _phase_one_load(x_ptr: tl.tensor, N: tl.tensor, stride_x: tl.tensor, item: tl.tensor, n_parts: tl.tensor,
                    on: tl.tensor, CHUNK: tl.constexpr, ALIGN: tl.constexpr) -> tuple[tl.tensor, ...]:
    # Phase 1's loads of chunk `item` (row-major over rows and chunks; nothing loaded where `on` is false).
    row = item // n_parts
    part = item % n_parts
    x_at, offs, mask, e_offs, e_mask, _base, _shift = _chunk_window(x_ptr, N, stride_x, row, part, CHUNK, ALIGN)
    x, x_e = _chunk_load(x_at, offs, mask & on, e_offs, e_mask & on, "evict_last")
    return x, x_e, row, part


@triton.jit
def _phase_one_publish(part_ptr: tl.tensor, count_ptr: tl.tensor, x: tl.tensor, x_e: tl.tensor, row: tl.tensor,
                       part: tl.tensor, n_parts: tl.tensor) -> None:
    # A chunk's sum of squares into its row's partials, then the row's counter (release).
    tl.store(part_ptr + row.to(tl.int64) * n_parts + part, _squares(x, x_e))
    tl.debug_barrier()  # every thread's stores are ordered before the release below
    tl.atomic_add(count_ptr + row, 1, sem="release")


@triton.jit
def _phase_two_load(x_ptr: tl.tensor, w_ptr: tl.tensor, N: tl.tensor, stride_x: tl.tensor, item: tl.tensor,
                    n_parts: tl.tensor, on: tl.tensor, CHUNK: tl.constexpr, ALIGN: tl.constexpr,
                    WT: tl.constexpr) -> tuple[tl.tensor, ...]:
    # Phase 2's loads of chunk `item`: x again (from L2, read one batch earlier) and the weight at its positions.
    row = item // n_parts
    part = item % n_parts
    x_at, offs, mask, e_offs, e_mask, base, shift = _chunk_window(x_ptr, N, stride_x, row, part, CHUNK, ALIGN)
    mask = mask & on
    e_mask = e_mask & on
    x, x_e = _chunk_load(x_at, offs, mask, e_offs, e_mask, "evict_first")
    w, w_e = _chunk_weights(w_ptr, offs, mask, e_offs, e_mask, shift, WT)
    return x, x_e, w, w_e, row, offs, mask, e_offs, e_mask, base


@triton.jit
def _rms_norm_two_phase(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor,
                        count_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor, eps: tl.tensor,
                        n_parts: tl.tensor, rows_b: tl.tensor, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
                        ALIGN: tl.constexpr, WT: tl.constexpr, PATIENCE: tl.constexpr,
                        OVERLAP: tl.constexpr = 0) -> None:
    # 16-bit rows off the 16-byte grid, too wide for one program, without the split path's wait with a chunk held in
    # registers: each chunk (_chunk_window's cut; M x n_parts of them) is read twice, once for its sum of squares
    # (phase 1: reads only, nobody waits) and once, while still in L2, to scale and store it (phase 2, once its row's
    # partials are all in). A persistent grid walks rows in batches of rows_b (planned: as many whole rows as one
    # chunk a program covers, about 8 MB of x on the H200): phase 1 of batch b,
    # then phase 2 of batch b - 1, its chunks in reverse (the most recently read first), so x is re-read one batch
    # later. Each program takes chunks pid, pid + G, ... of a batch. The host sizes the grid to what can be resident
    # at once; where programs are not (another context holds SMs), a wait gives up after PATIENCE polls and the
    # waiting program recomputes the row's partials itself (_row_sum_of_squares): slower, never a hang, same bits.
    # The interpreter (programs one after another) takes that branch for every row a later program shares.
    # OVERLAP 1: phase 2 issues its loads (x again, the weight) before it waits for its row, so they are in flight
    # during the wait. OVERLAP 2: also a program's k-th chunk of phase 1 and its k-th of phase 2 in one step, all their
    # loads issued before either is used, so phase 2's are in flight while phase 1 reduces and publishes (with 0, one
    # chunk in flight and each latency paid in turn). Phase 2 of batch b - 1 waits only on phase 1 of batch b - 1,
    # which every program finished in its previous step of the walk, so the order adds no wait that can close a cycle.
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    n_batches = (M + rows_b - 1) // rows_b
    b = 0
    while b <= n_batches:  # while, not range(): Triton 3.6's interpreter cannot range() over a runtime bound
        lo1 = b * rows_b * n_parts
        mine1 = tl.maximum(tl.minimum((b + 1) * rows_b, M) * n_parts - lo1 - pid + G - 1, 0) // G
        lo2 = (b - 1) * rows_b * n_parts
        mine2 = tl.where(b > 0, tl.maximum(tl.minimum(b * rows_b, M) * n_parts - lo2 - pid + G - 1, 0) // G, 0)
        if OVERLAP == 2:
            k = 0
            while k < tl.maximum(mine1, mine2):
                on1 = k < mine1
                on2 = k < mine2
                x1, x1_e, row1, part1 = _phase_one_load(x_ptr, N, stride_x, lo1 + pid + k * G, n_parts, on1, CHUNK,
                                                        ALIGN)
                x, x_e, w, w_e, row, offs, mask, e_offs, e_mask, base = _phase_two_load(
                    x_ptr, w_ptr, N, stride_x, lo2 + pid + (mine2 - 1 - k) * G, n_parts, on2, CHUNK, ALIGN, WT)
                if on1:
                    _phase_one_publish(part_ptr, count_ptr, x1, x1_e, row1, part1, n_parts)
                if on2:
                    total = _row_sum_of_squares(x_ptr, part_ptr, count_ptr, N, stride_x, row, n_parts, CHUNK, BLOCK_S,
                                                ALIGN, PATIENCE)
                    _chunk_store(y_ptr, x, x_e, w, w_e, tl.rsqrt(total / N + eps), offs, mask, e_offs, e_mask, base,
                                 ".cs")
                k += 1
        else:
            k = 0
            while k < mine1:
                x1, x1_e, row1, part1 = _phase_one_load(x_ptr, N, stride_x, lo1 + pid + k * G, n_parts, k >= 0,
                                                        CHUNK, ALIGN)
                _phase_one_publish(part_ptr, count_ptr, x1, x1_e, row1, part1, n_parts)
                k += 1
            k = 0
            while k < mine2:
                item = lo2 + pid + (mine2 - 1 - k) * G
                if OVERLAP == 1:
                    x, x_e, w, w_e, row, offs, mask, e_offs, e_mask, base = _phase_two_load(
                        x_ptr, w_ptr, N, stride_x, item, n_parts, k >= 0, CHUNK, ALIGN, WT)
                    total = _row_sum_of_squares(x_ptr, part_ptr, count_ptr, N, stride_x, row, n_parts, CHUNK, BLOCK_S,
                                                ALIGN, PATIENCE)
                else:
                    total = _row_sum_of_squares(x_ptr, part_ptr, count_ptr, N, stride_x, item // n_parts, n_parts,
                                                CHUNK, BLOCK_S, ALIGN, PATIENCE)
                    x, x_e, w, w_e, row, offs, mask, e_offs, e_mask, base = _phase_two_load(
                        x_ptr, w_ptr, N, stride_x, item, n_parts, k >= 0, CHUNK, ALIGN, WT)
                _chunk_store(y_ptr, x, x_e, w, w_e, tl.rsqrt(total / N + eps), offs, mask, e_offs, e_mask, base, ".cs")
                k += 1
        b += 1


@gluon.jit
def _whole(c: gl.constexpr, T: gl.constexpr, K: gl.constexpr, sh: gl.tensor, N: gl.tensor,
           rows_layout: gl.constexpr) -> gl.tensor:
    # Which of chunk c's K-element vectors (one a thread) lie wholly inside the row (window positions sh .. sh + N).
    vecs = c * T * K + gl.arange(0, T, layout=rows_layout) * K
    return ((vecs >= sh) & (vecs + K <= sh + N))[:, None]


@gluon.constexpr_function
def _masked_chunk(c: int, nchunk: int, realign: bool) -> bool:
    # Chunks that can hold a partial vector: a row's last; with REALIGN its first and last two (NCHUNK = cdiv(N + K -
    # 1, CHUNK): the row can end in either of the last two).
    return c == 0 or c >= nchunk - 2 if realign else c == nchunk - 1


_COPY = gl.constexpr("cp.async.cg.shared.global [$1], [$2], 16, $3;\n\tmov.u32 $0, 0;")


@gluon.constexpr_function
def _wait_asm(pending: int) -> str:
    """cp.async.wait_group as inline PTX: Gluon's cp.wait_group puts a CTA barrier after it, which nothing needs."""
    return f"cp.async.wait_group {pending};\n\tmov.u32 $0, 0;"


@gluon.jit
def _fetch(smem: gl.tensor, c: gl.constexpr, src_row: gl.tensor, lane: gl.tensor, sh: gl.tensor, N: gl.tensor,
           live: gl.tensor, null: gl.tensor, K: gl.constexpr, CHUNK: gl.constexpr) -> None:
    # Chunk c's copy group: each thread's 16-byte vector (window positions c CHUNK + lane K, wholly inside the row
    # sh .. sh + N) into its place in slot c (`smem`: its place in slot 0), as inline PTX, so no CTA barrier comes with
    # it: each thread later reads back only the vector it copied, after its own wait (softmax.py's FREE copies; a
    # candidate is one file). A vector outside the row, or past the last row, reads nothing (src-size 0, from a
    # harmless address) and is zero-filled.
    vecs = c * CHUNK + lane * K
    ok = (vecs >= sh) & (vecs + K <= sh + N) & live
    gl.inline_asm_elementwise(_COPY, "=r,r,l,r",
                              [smem + c * CHUNK * (16 // K), gl.where(ok, src_row + vecs, null), gl.where(ok, 16, 0)],
                              dtype=gl.int32, is_pure=False, pack=1)
    cp.commit_group()


@gluon.jit
def _row_window(row: gl.tensor, N: gl.tensor, WBASE: gl.constexpr) -> tuple[gl.tensor, gl.tensor]:
    # REALIGN's window of a contiguous row: its first element's offset rounded down to a multiple of WBASE (a vector
    # or, with LINE, a line), and where the row starts inside it.
    start = row.to(gl.int64) * N
    base = (start // WBASE) * WBASE
    return base, (start - base).to(gl.int32)


@gluon.jit
def _fetch_row(smem: gl.tensor, x_ptr: gl.tensor, row: gl.tensor, M: gl.tensor, N: gl.tensor, stride_x: gl.tensor,
               lane: gl.tensor, WBASE: gl.constexpr, REALIGN: gl.constexpr, NCHUNK: gl.constexpr, K: gl.constexpr,
               CHUNK: gl.constexpr) -> None:
    # Every chunk's copy group of `row` (nothing past the last row) into the set of slots starting at `smem`: RING's
    # second row, whose window (REALIGN) is needed only for its copies here; the row loop finds it again.
    if REALIGN:
        base, sh = _row_window(row, N, WBASE)
        src = x_ptr + base
    else:
        sh = 0
        src = x_ptr + row.to(gl.int64) * stride_x
    for c in gl.static_range(NCHUNK):
        _fetch(smem, c, src, lane, sh, N, row < M, x_ptr, K, CHUNK)


@gluon.jit
def _stagger(cycles: gl.constexpr, layout: gl.constexpr) -> None:
    # Half the programs (alternate ones, the other half of them past the grid's middle) spin `cycles` SM clocks before
    # starting, so one-an-SM programs doing equal work do not pass through their sums of squares (no HBM traffic) in
    # lockstep (softmax.py's STAGGER).
    pid = gl.program_id(0)
    if (pid % 2 == 1) ^ (2 * pid >= gl.num_programs(0)):
        z = gl.zeros([32 * gl.num_warps()], gl.int32, layout)
        t0 = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [z], dtype=gl.int64, is_pure=False, pack=1)
        waited = gl.max(t0 - t0, axis=0)
        while waited < cycles:
            now = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [z], dtype=gl.int64, is_pure=False,
                                            pack=1)
            waited = gl.max(now - t0, axis=0)


@gluon.jit
def _resident_w(w_ptr: gl.tensor, cols: gl.tensor, sh: gl.tensor, WT: gl.constexpr, K: gl.constexpr,
                LINE: gl.constexpr) -> gl.tensor:
    # The weight's address at window positions `cols` of a row starting sh into its window: w[cols - sh], which is
    # row sh % K of the shifted table (_weight_table, WT > 0) at cols - (sh // K) K, still 16 bytes wide (sh < K but
    # with LINE); aligned rows (WT = 0, sh = 0) read w itself.
    if WT > 0 and LINE > 0:
        at = w_ptr + ((sh % K) * WT + cols - (sh // K) * K)  # (sh // K) * K: a multiple of K the compiler sees
    elif WT > 0:
        at = w_ptr + (sh * WT + cols)
    else:
        at = w_ptr + cols
    return at


def _shift_asm() -> str:
    """PTX for WSHIFT: 8 16-bit weights ($0-$3, packed two a register) = elements 8 - sh .. 15 - sh of the 16 in B
    ($4-$7, the vector before) then A ($8-$11, the thread's own aligned vector), sh in $12 (0-7): register q = 4 + k -
    ceil(sh / 2) and the next, funnel-shifted by 16 bits where sh is odd; q chosen by predicated moves."""
    words = [f"${4 + i}" for i in range(8)]
    lines = ["{", ".reg .pred p<5>;", ".reg .b32 u, s, lo, hi, r<4>;", "add.u32 u, $12, 1;", "shr.u32 u, u, 1;",
             "and.b32 s, $12, 1;", "shl.b32 s, s, 4;"]
    lines += [f"setp.ge.u32 p{i}, u, {i};" for i in range(1, 5)]
    for k in range(4):
        lines.append(f"mov.b32 lo, {words[k + 4]};")
        lines += [f"@p{i} mov.b32 lo, {words[k + 4 - i]};" for i in range(1, 5)]
        lines.append(f"mov.b32 hi, {words[min(k + 5, 7)]};")
        lines += [f"@p{i} mov.b32 hi, {words[k + 5 - i]};" for i in range(1, 5)]
        lines.append(f"shf.r.clamp.b32 r{k}, lo, hi, s;")
    lines += [f"mov.b32 ${k}, r{k};" for k in range(4)] + ["}"]
    return "\n\t".join(lines)


_SHIFT = gl.constexpr(_shift_asm())
_SHIFT_CONSTRAINTS = gl.constexpr(",".join(["=r"] * 4 + ["r"] * 16))


@gluon.jit
def _aligned_w(w_ptr: gl.tensor, q: gl.tensor, N: gl.tensor, K: gl.constexpr, TAIL: gl.constexpr,
               layout: gl.constexpr) -> gl.tensor:
    # w's aligned K-element vectors starting at q (one a thread, q a multiple of K), zero outside w: 16-byte loads of
    # the vectors wholly inside; TAIL: w's last partial vector element by element (off for every other thread).
    at = q[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[None, :]
    whole = ((q >= 0) & (q + K <= N))[:, None]
    v = gl.load(w_ptr + at, mask=whole, other=0.0)
    if TAIL:
        v = gl.where(whole, v, gl.load(w_ptr + at, mask=(q + K > N)[:, None] & (at < N), other=0.0))
    return v


@gluon.jit
def _shifted_w(w_ptr: gl.tensor, at: gl.tensor, sh: gl.tensor, N: gl.tensor, K: gl.constexpr, W: gl.constexpr,
               TAIL: gl.constexpr) -> gl.tensor:
    # The weight at window positions at + lane K + j (w[at + lane K + j - sh], sh < K = 8) for WSHIFT's staging, in
    # the resident kernel's [T, K] layout: the thread's aligned vector and the one before it (16-byte loads; the
    # second an L1 hit: the neighbour's), shifted in registers (_shift_asm), instead of K misaligned 2-byte loads.
    # TAIL: the last two chunks (a row can end in either).
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    q = at + gl.arange(0, 32 * W, layout=gl.SliceLayout(1, layout)) * K
    mine = _aligned_w(w_ptr, q, N, K, TAIL, layout)
    before = _aligned_w(w_ptr, q - K, N, K, TAIL, layout)
    shift = gl.zeros([32 * W, K], gl.int32, layout) + sh
    return gl.inline_asm_elementwise(_SHIFT, _SHIFT_CONSTRAINTS, [before, mine, shift], dtype=w_ptr.dtype.element_ty,
                                     is_pure=True, pack=8)


# WIDEN (experiment, off: _RESIDENT_WIDEN): bf16 pairs widened to fp32 by inline PTX, a shift and a mask a pair (each
# bf16 is the top half of its fp32), where Triton's .to(float32) takes the high one out and shifts it back (PRMT +
# SHF: one instruction more a pair). Exact either way, so the same bytes. softmax.py's _widen (a candidate is one file).
_WIDEN_PAIR = gl.constexpr("{ shl.b32 $0, $2, 16;\n\tand.b32 $1, $2, 0xffff0000; }")


@gluon.jit
def _f32(x: gl.tensor, WIDEN: gl.constexpr) -> gl.tensor:
    # x (16-bit, pairs of neighbours in one thread) as fp32, exactly: WIDEN's inline PTX for bf16, else .to().
    if WIDEN and x.dtype == gl.bfloat16:
        y = gl.inline_asm_elementwise(_WIDEN_PAIR, "=r,=r,r", [x], dtype=gl.float32, is_pure=True, pack=2)
    else:
        y = x.to(gl.float32)
    return y


@gluon.jit
def _rms_norm_resident(x_ptr: gl.tensor, w_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                       stride_x: gl.tensor, eps: gl.tensor, NCHUNK: gl.constexpr, K: gl.constexpr,
                       ALIGN: gl.constexpr, REALIGN: gl.constexpr, STAGGER: gl.constexpr, WT: gl.constexpr,
                       LINE: gl.constexpr = 0, PDL: gl.constexpr = False, WS: gl.constexpr = 0,
                       PERIOD: gl.constexpr = 1, WSHIFT: gl.constexpr = False, RING: gl.constexpr = False,
                       RING_LAZY: gl.constexpr = False, WIDEN: gl.constexpr = False) -> None:
    # Gluon (Triton's explicit-layout dialect; softmax.py's resident kernel without the exponentials): a persistent
    # program keeps its whole row in shared memory, NCHUNK slots of T x K elements filled by cp.async. Sum of squares:
    # chunk c is read back as soon as its copy group lands (a per-thread running sum; one CTA-wide reduction a row).
    # Output: chunk c is read back, its slot at once refilled with the next row's chunk c, scaled by rsqrt(mean + eps)
    # and the weight, and stored, so the next row's reads fly while this row is written. HBM: one read, one write.
    # Each thread reads back exactly the vectors its own copies wrote, so its cp.async.wait_group is all the ordering
    # needed: no CTA barrier inside a row but its reduction's. The copies address the slots from global_smem + 0 (they
    # are the kernel's first allocation; a build test pins it). REALIGN (contiguous rows whose width is not a multiple
    # of K): a row through the window of whole vectors covering it, as _rms_norm_realigned sees rows (16-byte copies,
    # weight reads from the shifted table and stores; the row's part of its two edge vectors element by element).
    # LINE (experiment): the windows start on a multiple of LINE elements (a 128-byte line) instead of a vector; a row
    # starts up to LINE - 1 elements into its first chunk, and reads row sh % K of the shifted table.
    # WS (experiment, WSMEM): the weight of the row's first WS chunks is staged in shared memory once a program (16-byte
    # reads of the table row its rows need, or of w), not re-read from L2 every row. Through windows the programs take
    # their rows by shift class (PERIOD classes: rows c, c + PERIOD, ... start at the same place in their windows), so
    # one table row serves all of a program's rows. WSHIFT (with WS = NCHUNK, through windows, no LINE): no table and
    # no table launch: w itself is staged, each thread's K weights gathered in registers from the two aligned vectors
    # around them (16-byte loads), and the edge vectors' weights read from w element by element.
    # RING: two sets of NCHUNK slots, a program's rows taking them in turn; a row's output pass refills its set with
    # the row after next, so while a row's sum of squares waits on its copies (no stores in flight) the next row's
    # copies are already out: two rows in flight an SM, not one. RING_LAZY: the second row's copies go out once the
    # first row's sum is in (the prologue commits empty groups in their place), so the first row lands alone. Both
    # planned on aligned rows one program an SM (_RESIDENT_RING_ALIGNED).
    WBASE: gl.constexpr = LINE if LINE > 0 else K
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W  # threads; a chunk is T x K elements, K contiguous ones a thread
    SETS: gl.constexpr = 2 if RING else 1
    SET_BYTES: gl.constexpr = NCHUNK * T * K * 2  # one set of slots (16-bit elements)
    CHUNK: gl.constexpr = T * K
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    slots = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [SETS * NCHUNK, T, K],
                                      gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    N = (N // ALIGN) * ALIGN  # the host guarantees ALIGN divides N and the stride
    stride_x = (stride_x // ALIGN) * ALIGN
    offs = (gl.arange(0, T, layout=rows_layout) * K)[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[
        None, :]
    lane = gl.arange(0, T, layout=rows_layout)  # one element a thread: the waits are emitted once a thread
    smem = gl.inline_asm_elementwise("mov.u32 $0, global_smem;", "=r,r", [lane], dtype=gl.int32, is_pure=True,
                                     pack=1) + lane * 16
    if STAGGER > 0:
        _stagger(STAGGER, rows_layout)
    # A program's rows: class pid % PERIOD, every PERIOD-th row of it among the class's programs (PERIOD = 1: pid,
    # pid + programs, ...; the host keeps programs >= PERIOD).
    cls = gl.program_id(0) % PERIOD
    step = PERIOD * ((gl.num_programs(0) - cls + PERIOD - 1) // PERIOD)
    row = cls + PERIOD * (gl.program_id(0) // PERIOD)
    if REALIGN:
        base, sh = _row_window(row, N, WBASE)  # sh: where the row begins inside its window's first vector (LINE: line)
        x_row = x_ptr + base
        e_pos = gl.arange(0, 2, layout=rows_layout)
        e_cols = gl.arange(0, K, layout=gl.SliceLayout(0, layout))[None, :]
    else:
        sh = 0
        x_row = x_ptr + row.to(gl.int64) * stride_x
    for c in gl.static_range(NCHUNK):
        _fetch(smem, c, x_row, lane, sh, N, row < M, x_ptr, K, CHUNK)
    if RING_LAZY:  # empty groups where the second row's go, so every wait below counts the same
        for _c in gl.static_range(NCHUNK):
            cp.commit_group()
    elif RING:  # the program's second row into the second set
        _fetch_row(smem + SET_BYTES, x_ptr, row + step, M, N, stride_x, lane, WBASE, REALIGN, NCHUNK, K, CHUNK)
    at_set = 0  # the first slot of the set holding this row (RING: 0 or NCHUNK, in turn: a loop-carried int32)
    first = row
    if RING:
        at_set = gl.program_id(0) * 0
    if WS > 0:  # after the slots (the copies address them from global_smem + 0); each thread reads back its own stores
        w_slots = gl.allocate_shared_memory(w_ptr.dtype.element_ty, [WS, T, K],
                                            gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        for c in gl.static_range(WS):
            cols = c * CHUNK + offs
            if WSHIFT:
                w_s = _shifted_w(w_ptr, c * CHUNK, sh, N, K, W, c >= NCHUNK - 2)
            elif WT > 0:  # the table row of this program's shift class, whole (LINE: from (sh // K) K on)
                at = cols - (sh // K) * K if LINE > 0 else cols
                w_s = gl.load(_resident_w(w_ptr, cols, sh, WT, K, LINE), mask=(at >= 0) & (at < WT), other=0.0)
            else:
                w_s = gl.load(w_ptr + cols, mask=cols < N, other=0.0)
            w_slots.index(c).store(w_s)
    if PDL:  # TABLE_PDL: launched while the table kernel may still run; the first row's reads fly while it finishes
        gl.inline_asm_elementwise("griddepcontrol.wait;\n\tmov.u32 $0, 0;", "=r,r", [lane], dtype=gl.int32,
                                  is_pure=False, pack=1)
    while row < M:
        if REALIGN:
            base, sh = _row_window(row, N, WBASE)
            x_row = x_ptr + base
            y_row = y_ptr + base
            # the row's part of its first and last vectors (2 x K; an edge vector wholly inside the row is in a
            # chunk; N > K: the two never coincide)
            if LINE > 0:  # the row's first vector: where sh falls in its line
                e_start = gl.where(e_pos == 0, (sh // K) * K, ((sh + N - 1) // K) * K)[:, None]
            else:
                e_start = gl.where(e_pos == 0, 0, ((sh + N - 1) // K) * K)[:, None]
            e_offs = e_start + e_cols
            e_inside = (e_start >= sh) & (e_start + K <= sh + N)
            e_mask = (e_offs >= sh) & (e_offs < sh + N) & ~e_inside
            x_e = _f32(gl.load(x_row + e_offs, mask=e_mask, other=0.0), WIDEN)
        else:
            x_row = x_ptr + row.to(gl.int64) * stride_x
            y_row = y_ptr + row.to(gl.int64) * N
        ss_t = gl.zeros([T], gl.float32, rows_layout)
        for c in gl.static_range(NCHUNK):  # copies zero-fill what lies outside the row: no masks here
            # copy groups after this chunk's: the row's later chunks and, with RING, the other set's row
            gl.inline_asm_elementwise(_wait_asm(NCHUNK - 1 - c + (NCHUNK if RING else 0)), "=r,r", [lane],
                                      dtype=gl.int32, is_pure=False, pack=1)
            x = _f32(slots.index(at_set + c).load(layout), WIDEN)
            ss_t += gl.sum(x * x, axis=1)
        total = gl.sum(ss_t, axis=0)
        if REALIGN:
            total += gl.sum(gl.sum(x_e * x_e, axis=1), axis=0)
        inv = gl.rsqrt(total / N + eps)
        if RING_LAZY:
            if row == first:  # the program's second row, into the second set, now that its first has landed
                _fetch_row(smem + SET_BYTES, x_ptr, row + step, M, N, stride_x, lane, WBASE, REALIGN, NCHUNK, K,
                           CHUNK)
        ahead = row + SETS * step  # the row this row's slots take next
        if REALIGN:
            a_base, a_sh = _row_window(ahead, N, WBASE)
            a_row = x_ptr + a_base
        else:
            a_sh = 0
            a_row = x_ptr + ahead.to(gl.int64) * stride_x
        set_smem = smem
        if RING:
            set_smem = smem + at_set * (T * K * 2)
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            x = _f32(slots.index(at_set + c).load(layout), WIDEN)
            # the slot is free: the next copies into it (the row after this one, or with RING the row after next)
            _fetch(set_smem, c, a_row, lane, a_sh, N, ahead < M, x_ptr, K, CHUNK)
            if _masked_chunk(c, NCHUNK, REALIGN):  # (asked thrice: a static loop cannot name a constexpr)
                keep = _whole(c, T, K, sh, N, rows_layout) if REALIGN else cols < N
            if c < WS:
                w = _f32(w_slots.index(c).load(layout), WIDEN)
            elif _masked_chunk(c, NCHUNK, REALIGN):
                w = _f32(gl.load(_resident_w(w_ptr, cols, sh, WT, K, LINE), mask=keep, other=0.0), WIDEN)
            else:
                w = _f32(gl.load(_resident_w(w_ptr, cols, sh, WT, K, LINE)), WIDEN)
            if _masked_chunk(c, NCHUNK, REALIGN):
                gl.store(y_row + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=keep)
            else:
                gl.store(y_row + cols, (x * inv * w).to(y_ptr.dtype.element_ty))
        if REALIGN:
            if WSHIFT:
                w_e = _f32(gl.load(w_ptr + (e_offs - sh), mask=e_mask, other=0.0), WIDEN)
            else:
                w_e = _f32(gl.load(_resident_w(w_ptr, e_offs, sh, WT, K, LINE), mask=e_mask, other=0.0), WIDEN)
            gl.store(y_row + e_offs, (x_e * inv * w_e).to(y_ptr.dtype.element_ty), mask=e_mask)
        row += step
        if RING:
            at_set = NCHUNK - at_set
    cp.wait_group(0)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv is a @jit function: calling it on the host costs microseconds


def _weight_table(w: torch.Tensor, wt: int, zero: torch.Tensor | None = None, release: bool = False) -> torch.Tensor:
    """The weight shifted by 0-7 elements, rows of wt (a multiple of 8) window positions: what a realigned launch
    with WT=wt reads instead of w. Built every call (one small kernel, 16 x wt bytes written): the weight may change
    between calls, and a cache keyed on its address would serve a stale table after an in-place write. `zero`: an
    int32 tensor the same launch fills with zeros (the split path's row counters). release: the next launch may start
    at once (TABLE_PDL: it waits for this grid before it reads the table)."""
    table = torch.empty((8, wt), dtype=w.dtype, device=w.device)
    target = zero if zero is not None else table  # Z = 0: never written
    _rms_norm_weight_table[(8, _cdiv(wt, 2048))](w, table, w.numel(), target, 0 if zero is None else zero.numel(),
                                                 WT=wt, BLOCK=2048, RELEASE=release, num_warps=4)
    return table


def _wide_plan(m: int, row_bytes: int, n_sm: int) -> tuple[int, int]:
    """(programs, chunk) for wide rows.

    Two programs per SM (8192-element chunks) while two rows per SM fit the L2 budget, else one program
    per SM with 16384-element chunks: either way about 32 KB of loads in flight per SM. One program per
    row instead when a persistent grid would spread rows unevenly (133 rows on 132 programs).
    """
    per_sm = 2 if 2 * n_sm * row_bytes <= _L2_BUDGET_BYTES else 1
    programs = min(m, per_sm * n_sm)
    if _cdiv(m, programs) * programs > _MAX_IMBALANCE * m:
        programs = m
    return programs, 16384 // per_sm


Launch = tuple[Callable[..., object], dict[str, int]]


class _Split(NamedTuple):
    """Rows too wide for one program, on a GPU: _rms_norm_split, one program per chunk of a row."""

    launch: Callable[..., object]
    meta: dict[str, int]
    n_parts: int  # programs per row


class _TwoPhase(NamedTuple):
    """16-bit rows off the 16-byte grid too wide for one program, on a GPU: _rms_norm_two_phase on a persistent
    grid."""

    meta: dict[str, int]
    n_parts: int  # chunks per row
    rows_b: int  # rows per batch (0: whole rows for one chunk a program, _two_phase_rows)
    per_sm: int  # programs an SM asked for (the launch caps it at what can be resident)


Plan = Launch | _Split | _TwoPhase
# Launch plans per (shape, row stride, dtype, device): a call of a known shape costs a dict lookup instead of the
# planning arithmetic, which matters when the kernel itself takes 2 us. Bounded so odd shape streams cannot grow it.
_PLANS: dict[tuple[object, ...], Plan] = {}
_MAX_PLANS = 4096


def _looped_plan(m: int, n: int, elsize: int, align: int, n_sm: int) -> Launch:
    programs, chunk = _wide_plan(m, n * elsize, n_sm)
    # Scalar accesses need twice the threads to keep per-thread registers (addresses) in check.
    warps = _warps(chunk) * (1 if align * elsize == 16 else 2)
    return _rms_norm_wide[(programs,)], {"CHUNK": chunk, "ALIGN": align, "num_warps": warps}


def _split_plan(m: int, n: int, stride: int, elsize: int, align: int, realign: bool = True) -> _Split:
    """Rows too wide for one program (_rms_norm_split): 8192-element chunks with 16-byte accesses; 16-bit rows off the
    16-byte grid through their vector windows, 4096 positions a program (realign; 4096-element chunks of scalar
    accesses without)."""
    if elsize == 2 and align * elsize < 16 and realign:
        n_parts = _cdiv(n + 7, _SPLIT_CHUNK_REALIGNED)
        meta = {"CHUNK": _SPLIT_CHUNK_REALIGNED, "ALIGN": _align(2, stride - n), "REALIGN": True,
                "WT": n_parts * _SPLIT_CHUNK_REALIGNED}
    else:
        chunk = _SPLIT_CHUNK if align * elsize == 16 else _SPLIT_CHUNK_SCALAR
        n_parts = _cdiv(n, chunk)
        meta = {"CHUNK": chunk, "ALIGN": align}
    return _Split(_rms_norm_split[(m * n_parts,)], {**meta, "BLOCK_S": triton.next_power_of_2(n_parts),
                                                    "num_warps": _SPLIT_WARPS}, n_parts)


def _two_phase_plan(m: int, n: int, stride: int, chunk: int = _TWO_PHASE_CHUNK, warps: int = _TWO_PHASE_WARPS,
                    per_sm: int = _TWO_PHASE_PER_SM, batch_bytes: int = _TWO_PHASE_BATCH_BYTES,
                    patience: int = _TWO_PHASE_PATIENCE, overlap: int | None = None) -> _TwoPhase:
    """16-bit rows off the 16-byte grid (_rms_norm_two_phase): chunks of `chunk` window positions, per_sm programs
    an SM, batches of about batch_bytes of x (0: as many whole rows as one chunk a program covers, set at launch),
    the kernel's OVERLAP (None: _TWO_PHASE_OVERLAP)."""
    n_parts = _cdiv(n + 7, chunk)
    meta = {"CHUNK": chunk, "BLOCK_S": max(2, triton.next_power_of_2(n_parts)), "ALIGN": _align(2, stride - n),
            "WT": n_parts * chunk, "PATIENCE": patience, "num_warps": warps,
            "OVERLAP": _TWO_PHASE_OVERLAP if overlap is None else overlap}
    return _TwoPhase(meta, n_parts, max(1, min(m, batch_bytes // (2 * n))) if batch_bytes else 0, per_sm)


def _two_phase_rows(m: int, n_parts: int, programs: int) -> int:
    """Rows per two-phase batch: as many whole rows as `programs` cover at one chunk each (at least one, at most all).
    A batch of a few chunks more than programs takes a second round in which most programs have nothing to do."""
    return max(1, min(m, programs // n_parts))


def _resident_per_sm(compiled: object, warps: int) -> int:
    """Programs of a compiled kernel one SM holds at once, from its registers (allocated 8 a thread at a time; known
    once it has been launched: Triton loads a module lazily), threads and shared memory."""
    regs = -(-max(1, int(getattr(compiled, "n_regs", 0) or 255)) // 8) * 8  # unknown: the most a thread can use
    smem = int(getattr(getattr(compiled, "metadata", None), "shared", 0) or 0)
    threads = 32 * warps
    return max(1, min(_SM_REGISTERS // (regs * threads), _SM_THREADS // threads, _SM_PROGRAMS,
                      _SM_SHARED // smem if smem else _SM_PROGRAMS))


# Programs an SM the two-phase kernel can hold, per (meta, dtype, device): known once a config has been launched.
_RESIDENT: dict[tuple[object, ...], int] = {}


def _plan(m: int, n: int, stride: int, elsize: int, device: torch.device, realign_split: bool = True,
          two_phase: bool = True, resident: bool = True) -> Plan:
    """The launch for an m x n rms_norm (row stride `stride`). realign_split=False: wide 16-bit rows off the 16-byte
    grid on scalar accesses, as before the realigned split; two_phase=False: the realigned split where the two-phase
    path runs now; resident=False: the two-phase or split path where the resident path runs now (benchmarks time
    them beside the built-in's; tests check each)."""
    plan = _plan_launch(m, n, stride, elsize, device, realign_split, two_phase, resident)
    # the row kernel's plans are the ones with a BLOCK_N
    if _PDL and 2 * m * n * elsize >= _PDL_MIN_BYTES and not isinstance(plan, _Split | _TwoPhase) \
            and "BLOCK_N" in plan[1] and _dependent_launch(device):
        return plan[0], {**plan[1], "PDL": True, "launch_pdl": True}
    if _RESIDENT_TABLE_PDL and not isinstance(plan, _Split | _TwoPhase) and _reads_table(plan[1]) \
            and _dependent_launch(device):
        return _table_pdl(plan)
    return plan


def _reads_table(meta: dict[str, int]) -> bool:
    """A resident launch through windows: its weight comes from the shifted table, its own launch before it."""
    return bool(meta.get("WT")) and "NCHUNK" in meta


def _table_pdl(launch: Launch) -> Launch:
    """A resident launch through windows with TABLE_PDL: launched with programmatic dependent launch after its weight
    table's kernel, which releases it at once; it waits for the table after issuing its first row's copies."""
    if not _reads_table(launch[1]):
        raise ValueError("TABLE_PDL is for resident launches that read a weight table")
    return launch[0], {**launch[1], "PDL": True, "launch_pdl": True}


def _smem_per_sm(device: torch.device) -> int:
    """Shared memory per SM of a CUDA device; 0 before sm_80 (no cp.async: no resident path)."""
    return _cuda_smem(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _cuda_smem(index: int) -> int:
    props = torch.cuda.get_device_properties(index)
    return int(props.shared_memory_per_multiprocessor) if props.major >= 8 else 0


def _resident_plan(m: int, n: int, stride: int, n_sm: int, smem_per_sm_bytes: int, per_sm: int = 0,
                   min_fill: float = _RESIDENT_MIN_FILL, line: int | None = None, wsmem: bool | None = None,
                   wshift: bool | None = None, ring: bool | None = None, lazy: bool | None = None,
                   widen: bool | None = None) -> Launch | None:
    """The resident path's launch (_resident_config's programs and meta), or None where it does not apply."""
    config = _resident_config(m, n, stride, n_sm, smem_per_sm_bytes, per_sm, min_fill, line, wsmem, wshift, ring,
                              lazy, widen)
    return None if config is None else (_rms_norm_resident[(config[0],)], config[1])


def _resident_config(m: int, n: int, stride: int, n_sm: int, smem_per_sm_bytes: int, per_sm: int = 0,
                     min_fill: float = _RESIDENT_MIN_FILL, line: int | None = None, wsmem: bool | None = None,
                     wshift: bool | None = None, ring: bool | None = None,
                     lazy: bool | None = None, widen: bool | None = None) -> tuple[int, dict[str, int]] | None:
    """The resident path's programs and meta for m x n 16-bit rows (on the 16-byte grid, or contiguous: REALIGN), or
    None where it does not apply. Two 16-warp programs an SM where two whole rows (n + 7 window positions with
    REALIGN) fit _RESIDENT_PAIR_BYTES and the rows fill min_fill of their last round of programs (m / (rounds x 2
    SMs)); else one 32-warp program an SM where a whole row fits what one program alone may take and the rows fill
    min_fill of their last round of SMs; else None. per_sm (1 or 2) asks for that count (None where it does not fit
    or fill). line: LINE, REALIGN's windows on multiples of `line` elements (default _RESIDENT_LINE; 0: vectors).
    wsmem: WSMEM, the weight of the first WS chunks in the shared memory the rows leave (default: _RESIDENT_WSMEM, or
    _RESIDENT_WSMEM_PARTIAL's rule: rows on the grid whose weight does not all fit, _RESIDENT_WSMEM_MIN_ROWS rows a
    program or more);
    wshift: WSHIFT where WSMEM stages every chunk through windows on vectors: no table (default _RESIDENT_WSHIFT);
    ring: RING where two sets of the row's slots fit the program's share and no weight is staged (default:
    _RESIDENT_RING, or _RESIDENT_RING_ALIGNED's rule: rows on the grid at one program an SM, more rows than
    programs); lazy: RING_LAZY where RING is given (default: where the rule gives it); widen: WIDEN (default
    _RESIDENT_WIDEN)."""
    realign = n % 8 != 0 or stride % 8 != 0
    if realign and stride != n:
        return None
    line = (_RESIDENT_LINE if line is None else line) if realign else 0
    if line % 8:
        raise ValueError("LINE is a whole number of 8-element vectors")
    span = n + max(8, line) - 1 if realign else n
    for count, warps, budget in ((2, _RESIDENT_PAIR_WARPS, _RESIDENT_PAIR_BYTES), (1, _RESIDENT_WARPS,
                                                                                   _RESIDENT_BUDGET_BYTES)):
        chunk = 32 * warps * 8
        n_chunks = _cdiv(span, chunk)
        slots = count * n_sm
        share = min(budget, smem_per_sm_bytes - _RESIDENT_RESERVE_BYTES * count)  # an SM's for its programs' slots
        fits = count * n_chunks * chunk * 2 <= share
        if per_sm in (0, count) and fits and m >= min_fill * _cdiv(m, slots) * slots:
            meta = {"NCHUNK": n_chunks, "K": 8, "ALIGN": 1 if realign else 8, "REALIGN": realign,
                    "STAGGER": _RESIDENT_STAGGER if count == 1 else 0, "WT": n_chunks * chunk if realign else 0,
                    "num_warps": warps}
            if line:
                meta["LINE"] = line
            staged = _weight_slots(min(m, slots), n, n_chunks, chunk, realign, line, share // count)
            partial = not realign and staged.get("WS", n_chunks) < n_chunks \
                and m >= _RESIDENT_WSMEM_MIN_ROWS * min(m, slots)  # _RESIDENT_WSMEM_PARTIAL's rows
            if (_RESIDENT_WSMEM or (_RESIDENT_WSMEM_PARTIAL and partial)) if wsmem is None else wsmem:
                meta.update(staged)
                if (_RESIDENT_WSHIFT if wshift is None else wshift) and realign and not line \
                        and staged.get("WS") == n_chunks:
                    meta.update(WSHIFT=True, WT=0)
            aligned_ring = _RESIDENT_RING_ALIGNED and not realign and count == 1 and m > slots  # the rule's rows
            if (_RESIDENT_RING or aligned_ring if ring is None else ring) and "WS" not in meta \
                    and 2 * count * n_chunks * chunk * 2 <= share:
                meta["RING"] = True
                if (aligned_ring and ring is None) if lazy is None else lazy:
                    meta["RING_LAZY"] = True
            if _RESIDENT_WIDEN if widen is None else widen:
                meta["WIDEN"] = True
            if count == 2 and realign:  # both programs' registers must fit the SM's 65536: REALIGN's builds take 64
                meta["maxnreg"] = _SM_REGISTERS // (count * 32 * warps)  # at 9-11 chunks, 95 at 12 uncapped (sm_90)
            return min(m, slots), meta
    return None


def _weight_slots(programs: int, n: int, n_chunks: int, chunk: int, realign: bool, line: int,
                  program_bytes: int) -> dict[str, int]:
    """WSMEM's meta: WS, the chunks of weight that fit beside a program's n_chunks row slots in program_bytes (16-bit
    elements), and PERIOD, the shift classes of rows through windows (rows r and r + PERIOD start at the same place in
    their windows); {} where no chunk fits or there are fewer programs than classes."""
    ws = min(n_chunks, program_bytes // (2 * chunk) - n_chunks)
    base = max(8, line) if realign else 1
    period = base // math.gcd(n % base, base) if realign else 1
    return {"WS": ws, "PERIOD": period} if ws > 0 and programs >= period else {}


def _dependent_launch(device: torch.device) -> bool:
    """Programmatic dependent launch: sm_90 on, compiled (under TRITON_INTERPRET=1 @triton.jit makes an interpreted
    function)."""
    return (device.type == "cuda" and isinstance(_rms_norm_rows, triton.JITFunction) and torch.cuda.is_available()
            and torch.cuda.get_device_capability(device)[0] >= 9)


def _plan_launch(m: int, n: int, stride: int, elsize: int, device: torch.device, realign_split: bool,
                 two_phase: bool, resident: bool) -> Plan:
    align = _align(elsize, n, stride)
    vectorised = align * elsize == 16
    if n > (_MAX_FUSED_N if vectorised and elsize == 2 else _MAX_FUSED_N_NARROW):
        # Compiled only: under TRITON_INTERPRET=1 @triton.jit makes an interpreted function, whatever the device
        # (and the plan is decided before any device query).
        if device.type == "cuda" and isinstance(_rms_norm_split, triton.JITFunction):
            windows = stride == n and not vectorised and n > _RESIDENT_WINDOWS_MIN_N
            if resident and elsize == 2 and (n > _RESIDENT_MIN_N or windows) and (vectorised or stride == n):
                launch = _resident_plan(m, n, stride, _num_sms(device), _smem_per_sm(device))
                if launch is not None:
                    return launch
            if two_phase and realign_split and elsize == 2 and not vectorised and n >= _TWO_PHASE_MIN_N:
                return _two_phase_plan(m, n, stride)
            split = _split_plan(m, n, stride, elsize, align, realign=realign_split)
            if split.n_parts <= _num_sms(device):  # one row's programs are surely resident together
                return split
        return _looped_plan(m, n, elsize, align, _num_sms(device))
    n_sm = _num_sms(device)
    window = _window(n)
    if elsize == 2 and n % 8 and window <= _REALIGNED_MAX_WINDOW and (
            _REALIGNED_MIN_N <= n or (_REALIGNED_NARROW_MIN_N <= n and window == _REALIGNED_NARROW_WINDOW)):
        parts = _parts(n)
        return _realigned_plan(m, n, stride, parts if 4 * sum(parts) < 3 * window else (window, 0, 0))
    block_n = triton.next_power_of_2(n)
    if elsize == 2 and vectorised and _REREAD_MIN_N <= block_n <= _REREAD_MAX_N and (block_n == n or n >= 2048):
        return _reread_plan(m, n, block_n, align, n_sm)
    if elsize == 2 and _SHORT_MIN_LANES <= block_n <= (_SHORT_MAX_LANES if align > 1 else _SHORT_SCALAR_MAX_LANES):
        return _short_plan(m, n, block_n, align, n_sm)
    block_m = min(max(1, _TILE // block_n), triton.next_power_of_2(m))
    while block_m > 1 and _cdiv(m, block_m) < _WAVES * n_sm:
        block_m //= 2
    return _rms_norm_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                   "num_warps": _warps(block_m * block_n)}


def _short_plan(m: int, n: int, block_n: int, align: int, n_sm: int) -> Launch:
    """16-bit rows padded to 128-1024 lanes (128-256 if odd): x re-read for the scaling pass, 1024-element tiles on
    one warp where accesses are scalar (odd widths), else 2048-4096-element tiles at 16 elements a thread. On the
    H200 (bf16, CUPTI) the best config swept or within 4% of it at six shapes, against the 8192-element tiles held
    across the reduction before (evidence/h200/2026-12-02_in_vec_table/4_*): 4096 x 127 2.23 us (was 2.9;
    torch.compile 3.7), 4096 x 255 2.82 (3.6; 2.92), 16384 x 100 3.03 (4.1; 4.1), 4096 x 1000 4.62 (5.8; 5.2),
    8192 x 196 3.05 (3.8; 3.5); planned, ahead of torch.compile at all six (`5_*`)."""
    if align == 1:
        tile, warps = _SHORT_SCALAR_TILE, 1
    else:
        tile = _SHORT_TILE if block_n <= 256 else _SHORT_WIDE_TILE
        warps = tile // (32 * _SHORT_PER_THREAD)
    block_m = min(max(1, tile // block_n), triton.next_power_of_2(m))
    while block_m > 1 and _cdiv(m, block_m) < _WAVES * n_sm:
        block_m //= 2
    even = block_n == n and m % block_m == 0
    return _rms_norm_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                   "EVEN": even, "REREAD": True, "num_warps": warps}


def _reread_plan(m: int, n: int, block_n: int, align: int, n_sm: int) -> Launch:
    """16-bit rows of 1024 to 8192 elements: the tile (about 4096 elements) re-read for the scaling pass, unmasked
    where the row is a power of two wide and the rows divide evenly, on about 16 of the row's own elements per thread
    (the masked lanes of a ragged row do no work, so they do not count). Rows that need masks go one to a program:
    two masked rows per program re-read lost 12 points (8192 x 2880). On the H200, bf16, CUPTI kernel time
    (benchmarks/kernel_sweep.py --cupti --only rms_norm_parity): 90-103% of copy bandwidth from 8192 x 2880 to
    65536 x 4096, level with or ahead of torch.compile and Liger on every shape swept."""
    block_m = min(max(1, _REREAD_TILE // block_n), triton.next_power_of_2(m)) if block_n == n else 1
    while block_m > 1 and _cdiv(m, block_m) < _WAVES * n_sm:
        block_m //= 2
    warps = max(4, min(16, 1 << max(0, (block_m * n // 512).bit_length() - 1)))
    even = block_n == n and m % block_m == 0
    return _rms_norm_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                   "EVEN": even, "REREAD": True, "num_warps": warps}


def _window(n: int) -> int:
    """The realigned tile: a 16-bit row that starts mid-vector spans up to n + 7 window positions."""
    return triton.next_power_of_2(n + 7)


def _parts(n: int) -> tuple[int, int, int]:
    """The realigned window in at most three power-of-two parts (0: none) covering the n + 7 positions rounded up to
    an eighth of their largest power of two and to _MIN_PART (softmax._parts' rule: at most 12.5% of the lanes
    idle, or one part's worth, against up to half for one window). The plan takes them only where they save over a
    quarter of the window: H200, bf16, CUPTI, 4096 x 4097 70.9% of copy on 4096+1024 lanes against 55.7% on 8192,
    but 3124 x 5999 65-68% against 66-67%, 8192 x 2879 70.9% against 74.0%, 2000 x 12345 63.4% against 66.4%."""
    span = n + 7
    top = 1 << (span.bit_length() - 1)
    quantum = max(top // 8, _MIN_PART)
    rounded = -(-span // quantum) * quantum
    if bin(rounded - top).count("1") > 2:  # seven eighths: four parts; the kernel takes three
        rounded = 2 * top
    if rounded == 2 * top:
        return rounded, 0, 0
    rest = [quantum << bit for bit in (2, 1, 0) if (rounded - top) & (quantum << bit)] + [0, 0]
    return top, rest[0], rest[1]


def _realigned_plan(m: int, n: int, stride: int, parts: tuple[int, int, int], warps: int = 0,
                    reread: bool | None = None) -> Launch:
    """Unaligned 16-bit rows (_rms_norm_realigned), one per program, the window in `parts` (_parts(n); (_window(n),
    0, 0) is one window): 2 warps for a 2048-lane window, 4 up to 8192 lanes (32-64 elements per thread), 8 warps
    re-reading x beyond (benchmarks/kernel_sweep.py --only rms_norm_realigned; H200, bf16, CUPTI, one window:
    8192 x 2879 72.8% of copy, 3124 x 5999 65.0%, 2000 x 12345 66.1%, against 61%, 50% and 43% with scalar
    accesses; torch.compile 35-44%)."""
    lanes = sum(parts)
    warps = warps or (_REALIGNED_NARROW_WARPS if lanes <= _REALIGNED_NARROW_WINDOW else 4 if lanes <= 8192 else 8)
    return _rms_norm_realigned[(m,)], {"WINDOW": parts[0], "PART1": parts[1], "PART2": parts[2], "VEC": 8,
                                       "ALIGN_X": _align(2, stride - n),
                                       "REREAD": lanes > 8192 if reread is None else reread, "WT": lanes,
                                       "num_warps": warps}


def candidate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim of a 2-D x (any row stride); the result is a new contiguous tensor."""
    m, n = x.shape
    if x.stride(1) != 1:  # column strides are not a supported fast path; rows with padding are
        x = x.contiguous()
    if weight.stride(0) != 1:
        weight = weight.contiguous()
    device = x.device
    y = torch.empty((m, n), dtype=x.dtype, device=device)
    if m == 0 or n == 0:
        return y
    stride = x.stride(0)
    key = (m, n, stride, x.dtype, device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(m, n, stride, x.element_size(), device)
    _run(plan, x, weight, y, eps)
    return y


def _run(plan: Plan, x: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, eps: float) -> None:
    """y = rms_norm(x) by `plan` (x with unit column stride, y contiguous): its workspace, weight table and launch."""
    m, n = x.shape
    stride = x.stride(0)
    if isinstance(plan, _Split | _TwoPhase):
        partials = torch.empty((m, plan.n_parts), dtype=torch.float32, device=x.device)
        wt = plan.meta.get("WT", 0)
        if wt:  # the table's launch zeroes the row counters too
            done = torch.empty((m,), dtype=torch.int32, device=x.device)
            w_arg = _weight_table(weight, wt, done)
        else:
            done = torch.zeros((m,), dtype=torch.int32, device=x.device)
            w_arg = weight
        if isinstance(plan, _TwoPhase):
            key = (tuple(sorted(plan.meta.items())), x.dtype, x.device)
            grid = min(_RESIDENT.get(key, plan.per_sm) * _num_sms(x.device), m * plan.n_parts)
            compiled = _rms_norm_two_phase[(grid,)](x, w_arg, y, partials, done, m, n, stride, eps, plan.n_parts,
                                                    plan.rows_b or _two_phase_rows(m, plan.n_parts, grid),
                                                    **plan.meta)
            if key not in _RESIDENT:  # the first launch asks for per_sm: where fewer fit, slower (PATIENCE), not wrong
                _RESIDENT[key] = min(plan.per_sm, _resident_per_sm(compiled, plan.meta["num_warps"]))
        else:
            plan.launch(x, w_arg, y, partials, done, n, stride, eps, plan.n_parts, **plan.meta)
    else:
        launch, meta = plan
        if "NCHUNK" in meta and x.data_ptr() % 16:
            # The resident kernel copies x 16 bytes at a time from its rows' starts (inline cp.async, which needs
            # whole vectors; plans are cached by shape and stride, not by where x starts): a view starting inside a
            # vector is read from a fresh copy, which starts on one (contiguous: any plan of these rows takes it).
            x, stride = x.clone(memory_format=torch.contiguous_format), n
        wt = meta.get("WT", 0)
        w_arg = _weight_table(weight, wt, release=bool(meta.get("PDL"))) if wt else weight
        launch(x, w_arg, y, m, n, stride, eps, **meta)
