"""rms_norm rows too wide for one program, in two launches instead of a rendezvous (family `rms_norm_two_phase`).

The built-in's split path (_rms_norm_split) holds each chunk in registers while it waits for its row's siblings:
one HBM read and one write, but every program spends most of its life waiting (50-62% of copy on unaligned rows of
40000-65536, `hidden_wide` 289 x 65494 at 55%). The campaign's wide rows are few (1-512) and x is 33-67 MB where it
counts (64 MB moved or more), about what the H200's 50 MB L2 holds. Here a first launch reduces each chunk to its sum
of squares and stores it (reads only, nothing waits); a second launch re-reads each chunk, sums its row's partials
and writes y. If x is still in L2 when the second launch reads it, HBM sees the same one read and one write.

Knobs swept: chunk and warps; rows in 1, 2 or 4 batches (each batch's two launches back to back, so a batch's x is
re-read before the next batch's reads push it out of L2); the second launch walking chunks in reverse (the most
recently read first); cache hints (x loaded evict_last in the first launch and evict_first in the second, y stored
.cs so the writes do not push x out). Rows are cut as the split path cuts them: 16-bit rows off the 16-byte grid
through their vector windows (REALIGN, with the shifted weight table), aligned rows in plain chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import torch
import triton
import triton.language as tl
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref

from kernelproof_core.kernels import rms_norm
from kernelproof_core.kernels.rms_norm import _chunk_load, _chunk_store, _chunk_weights, _chunk_window, _squares


@triton.jit
def _chunk_sumsq(x_ptr: tl.tensor, N: tl.tensor, stride_x: tl.tensor, row: tl.tensor, part: tl.tensor,
                 CHUNK: tl.constexpr, ALIGN: tl.constexpr, REALIGN: tl.constexpr, HINT: tl.constexpr) -> tl.tensor:
    if REALIGN:
        x_at, offs, mask, e_offs, e_mask, _, _ = _chunk_window(x_ptr, N, stride_x, row, part, CHUNK, ALIGN)
        x, x_e = _chunk_load(x_at, offs, mask, e_offs, e_mask, HINT)
        return _squares(x, x_e)
    else:
        n = (N // ALIGN) * ALIGN
        cols = part * CHUNK + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row.to(tl.int64) * ((stride_x // ALIGN) * ALIGN) + cols, mask=cols < n, other=0.0,
                    eviction_policy=HINT).to(tl.float32)
        return tl.sum(x * x, axis=0)


@triton.jit
def _chunk_scale(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                 row: tl.tensor, part: tl.tensor, inv: tl.tensor, CHUNK: tl.constexpr, ALIGN: tl.constexpr,
                 REALIGN: tl.constexpr, WT: tl.constexpr, HINT: tl.constexpr, STORE: tl.constexpr) -> None:
    if REALIGN:
        x_at, offs, mask, e_offs, e_mask, base, shift = _chunk_window(x_ptr, N, stride_x, row, part, CHUNK, ALIGN)
        x, x_e = _chunk_load(x_at, offs, mask, e_offs, e_mask, HINT)
        w, w_e = _chunk_weights(w_ptr, offs, mask, e_offs, e_mask, shift, WT)
        _chunk_store(y_ptr, x, x_e, w, w_e, inv, offs, mask, e_offs, e_mask, base, STORE)
    else:
        n = (N // ALIGN) * ALIGN
        cols = part * CHUNK + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row.to(tl.int64) * ((stride_x // ALIGN) * ALIGN) + cols, mask=cols < n, other=0.0,
                    eviction_policy=HINT).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < n, other=0.0)
        tl.store(y_ptr + row.to(tl.int64) * n + cols, (x * inv * w.to(tl.float32)).to(y_ptr.dtype.element_ty),
                 mask=cols < n, cache_modifier=STORE)


@triton.jit
def _row_inv(part_ptr: tl.tensor, row: tl.tensor, n_parts: tl.tensor, N: tl.tensor, eps: tl.tensor,
             BLOCK_S: tl.constexpr) -> tl.tensor:
    # Partials summed in slot order (replays bit-exact); .cg: written by other SMs, never served from this one's L1.
    slots = tl.arange(0, BLOCK_S)
    sq = tl.load(part_ptr + row.to(tl.int64) * n_parts + slots, mask=slots < n_parts, other=0.0,
                 cache_modifier=".cg")
    return tl.rsqrt(tl.sum(sq, axis=0) / N + eps)


@triton.jit
def _rms_norm_phase(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, N: tl.tensor,
                    stride_x: tl.tensor, eps: tl.tensor, n_parts: tl.tensor, row0: tl.tensor, PHASE: tl.constexpr,
                    CHUNK: tl.constexpr, BLOCK_S: tl.constexpr, ALIGN: tl.constexpr, REALIGN: tl.constexpr,
                    WT: tl.constexpr, REVERSE: tl.constexpr, HINTS: tl.constexpr) -> None:
    # One program a chunk of rows row0, ...: PHASE 1 stores the chunk's sum of squares to part_ptr[row, part];
    # PHASE 2 reads the chunk again and stores it scaled by its row's rsqrt(mean square).
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    row = row0 + pid // n_parts
    part = pid % n_parts
    if PHASE == 1:
        sq = _chunk_sumsq(x_ptr, N, stride_x, row, part, CHUNK, ALIGN, REALIGN, "evict_last" if HINTS else "")
        tl.store(part_ptr + row.to(tl.int64) * n_parts + part, sq)
    else:
        inv = _row_inv(part_ptr, row, n_parts, N, eps, BLOCK_S)
        _chunk_scale(x_ptr, w_ptr, y_ptr, N, stride_x, row, part, inv, CHUNK, ALIGN, REALIGN, WT,
                     "evict_first" if HINTS else "", ".cs" if HINTS else "")


def _setup(x: torch.Tensor, weight: torch.Tensor, chunk: int, warps: int,
           hints: bool) -> tuple[int, torch.Tensor, torch.Tensor, dict[str, int | bool]]:
    """(programs a row, the weight or its shifted table, the partials, meta) for rows cut as the split path cuts
    them."""
    m, n = x.shape
    stride = x.stride(0)
    align = rms_norm._align(x.element_size(), n, stride)
    realign = align * x.element_size() < 16
    if realign:
        n_parts = -(-(n + 7) // chunk)
        w_arg = rms_norm._weight_table(weight, n_parts * chunk)
        align, wt = rms_norm._align(2, stride - n), n_parts * chunk
    else:
        n_parts, w_arg, wt = -(-n // chunk), weight, 0
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=x.device)
    meta: dict[str, int | bool] = {"CHUNK": chunk, "BLOCK_S": max(2, triton.next_power_of_2(n_parts)),
                                   "ALIGN": align, "REALIGN": realign, "WT": wt, "HINTS": hints,
                                   "num_warps": warps}
    return n_parts, w_arg, partials, meta


def rms_norm_two_phase(x: torch.Tensor, weight: torch.Tensor, eps: float, y: torch.Tensor, chunk: int, warps: int,
                       batches: int = 1, reverse: bool = True, hints: bool = True) -> torch.Tensor:
    """y = rms_norm(x) (16-bit, rows of 8193 or more, unit column stride) in 1 + 2 x batches launches: the weight
    table where rows are off the 16-byte grid, then per batch of rows the partials launch and the scaling launch."""
    m, n = x.shape
    n_parts, w_arg, partials, meta = _setup(x, weight, chunk, warps, hints)
    rows = -(-m // batches)
    for row0 in range(0, m, rows):
        grid = (min(rows, m - row0) * n_parts,)
        _rms_norm_phase[grid](x, w_arg, y, partials, n, x.stride(0), eps, n_parts, row0, PHASE=1, REVERSE=False,
                              **meta)
        _rms_norm_phase[grid](x, w_arg, y, partials, n, x.stride(0), eps, n_parts, row0, PHASE=2,
                              REVERSE=reverse, **meta)
    return y


# The campaign's hidden_wide draws (289 x 65494, 345 x 64803, 270 x 63553, 425 x 52717: unaligned, 34-55 MB of x),
# rows just over the threshold in several batches (600 x 50001), rows under it (500 x 33001) and an x far over the
# L2 (4096 x 40003, 328 MB). Swept at 627f522, 3586df5 and 643031c (2026-12-04_two_phase/1_*, 2_*, 3_*): the split
# ahead on aligned rows (512 x 65536, 512 x 40000, 1024 x 65536), on unaligned rows of 16385-33001 (512 x 24577,
# 1024 x 30001, 500 x 33001) and at 4096 x 40003. CAP_SHAPES: x past the 64 MB cap (1024 x 50001, 102 MB;
# 2000 x 60001, 240 MB) and rows under the 49153 threshold (1000 x 40003, 80 MB; 300 x 45001; 800 x 36001), where
# the plan is the split and the built-in two-phase kernel runs at the plan's own config beside it.
SHAPES = ((289, 65494), (345, 64803), (600, 50001), (425, 52717), (270, 63553), (500, 33001), (4096, 40003))
CAP_SHAPES = ((1024, 50001), (2000, 60001), (1000, 40003), (300, 45001), (800, 36001))
# Family rms_norm_two_phase_narrow: unaligned rows of 16385-32768 (5-9 chunks a row), where the split was ahead of
# 8 MB batches (1_*) but one round of programs was not tried.
NARROW_SHAPES = ((1024, 24577), (2000, 20001), (700, 30001), (4096, 16393), (512, 32761), (300, 28001))
# The two-launch form (chunk, warps, batches, reverse, hints): run at b43a6f9 and 73bc1f1, behind the persistent one
# at every unaligned shape (evidence/h200/2026-12-04_padded_words/1_*); kept for reruns, not swept by default.
CONFIGS: list[tuple[int, int, int, bool, bool]] = []


# The built-in's two-phase kernel at other configs than the plan's (chunk, warps, programs an SM, batch MB of x);
# the plan's own config where the plan is the split. It was planned from this file's persistent walk (4096 on 4 warps
# at 8 an SM, within 0-2 points of the best at every unaligned shape at b43a6f9, 73bc1f1, 3586df5), which it matched
# or beat at 643031c (3_*) and replaced (2e96226 has it). A form handing chunks out by tickets (3586df5) was 3-7
# points under that walk and under the split; 8192 on 8 warps (643031c) 2-10 points under 4096 on 4. Batches of 8-32 MB
# (ed5622a planned 8 MB) lost where a batch took a few chunks more than one round of programs (600 x 50001); the
# plan now sizes batches to one round.
BUILTIN = [(4096, 4, 8, 8, 0), (4096, 4, 4, 0, 0)]  # 8 MB batches (ed5622a's plan); one round on 4 programs an SM
# Family rms_norm_two_phase_overlap: the kernel's OVERLAP orders (1: phase 2's loads before its wait; 2: also phase 1's
# and phase 2's chunks in one step, both loaded first) against the plan (0), one round a batch. Hypothesis: the plan
# keeps one chunk in flight a program and pays each latency in turn (load, publish, poll, partials, re-read, store),
# so the 57-70% are latency, not bytes. Built for sm_90 (4096 on 4 warps): 64 registers at 0, 80 at 1 (8 bytes of
# stack), 86 at 2, so 8 asked an SM are 5 resident at 1 and 2 (the launch caps the grid at what fits); 2048 on 2 warps
# asks 12-16 an SM to keep the threads. The campaign's hidden_wide draws (476 x 63343 at 73.6% on the H100 in
# 2026-12-06_harness_0_9/3_*), others of the family and x past the L2. On the H100 (2026-12-06_two_phase_overlap/1_*)
# 1 gained at most 2.8 points and 2 no more (2 on 2048 positions and 2 warps lost 15-20): latency was not the limit.
OVERLAP_SHAPES = ((476, 63343), (345, 64803), (289, 65494), (600, 50001), (1024, 50001), (4096, 40003), (500, 33001))
OVERLAP_CONFIGS = [(4096, 4, 8, 0, 1), (4096, 4, 8, 0, 2), (2048, 2, 12, 0, 1), (2048, 2, 16, 0, 2),
                   (2048, 2, 12, 0, 2)]


def _planned_run(plan: rms_norm.Plan, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    rms_norm._run(plan, x, w, y, 1e-6)
    return y


def _checked(run: Callable[[], torch.Tensor], y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """run() within tolerance of the fp32 reference and its replay bit-exact; else says which, labelled."""
    y.fill_(float("nan"))
    first = run().clone()
    if not rms_norm_close(first, ref, label):
        return False
    if not torch.equal(first, run()):
        print(f"{label}: replay NOT bit-exact", flush=True)
        return False
    return True


def rms_norm_two_phase_trials(device: torch.device, dtype: torch.dtype,
                              shapes: tuple[tuple[int, int], ...] = SHAPES + CAP_SHAPES,
                              builtin: list[tuple[int, int, int, int, int]] = BUILTIN,
                              configs: list[tuple[int, int, int, bool, bool]] = CONFIGS) -> Iterator[Trial]:
    """The planned launch against the realigned split, the built-in two-phase kernel's other configs (BUILTIN; the
    plan's where the plan is the split) and this file's two-launch form (CONFIGS); each config checked against fp32
    and for a bit-exact replay before it is timed."""
    if dtype not in (torch.float16, torch.bfloat16):
        return
    for m, n in shapes:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        ref = rms_norm_ref(x, w)
        split = rms_norm._plan(m, n, n, x.element_size(), device, two_phase=False, resident=False)
        if isinstance(split, rms_norm._Split):  # the plan before the two-phase path
            run = partial(_planned_run, split, x, w, y)
            if _checked(run, y, ref, f"rms_norm.two_phase {m}x{n} split"):
                yield ("rms_norm.two_phase", (m, n), "split " + " ".join(f"{k}={v}" for k, v in split.meta.items()),
                       run, moved, False)
        planned = rms_norm._plan(m, n, n, x.element_size(), device, resident=False)  # the two-phase path's own configs
        default = (rms_norm._TWO_PHASE_CHUNK, rms_norm._TWO_PHASE_WARPS, rms_norm._TWO_PHASE_PER_SM,
                   rms_norm._TWO_PHASE_BATCH_BYTES >> 20, rms_norm._TWO_PHASE_OVERLAP)
        for chunk, warps, per_sm, batch_mb, overlap in builtin if isinstance(planned, rms_norm._TwoPhase) \
                else [default]:
            plan = rms_norm._two_phase_plan(m, n, n, chunk, warps, per_sm, batch_mb << 20, overlap=overlap)
            label = f"built-in chunk={chunk} warps={warps} per_sm={per_sm} " + (
                f"batch={batch_mb}MB" if batch_mb else "batch=one round") + f" overlap={overlap}"
            run = partial(_planned_run, plan, x, w, y)
            if _checked(run, y, ref, f"rms_norm.two_phase {m}x{n} {label}"):
                yield ("rms_norm.two_phase", (m, n), label, run, moved, False)
        for chunk, warps, batches, reverse, hints in configs:
            label = (f"chunk={chunk} warps={warps} batches={batches}" + (" reverse" if reverse else "")
                     + (" hints" if hints else ""))
            run = partial(rms_norm_two_phase, x, w, 1e-6, y, chunk, warps, batches, reverse, hints)
            if _checked(run, y, ref, f"rms_norm.two_phase {m}x{n} {label}"):
                yield ("rms_norm.two_phase", (m, n), label, run, moved, False)


def rms_norm_two_phase_narrow_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """rms_norm_two_phase_trials on NARROW_SHAPES."""
    return rms_norm_two_phase_trials(device, dtype, NARROW_SHAPES)


def rms_norm_two_phase_overlap_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The plan against OVERLAP_CONFIGS on OVERLAP_SHAPES (no split, no two-launch form)."""
    for trial in rms_norm_two_phase_trials(device, dtype, OVERLAP_SHAPES, OVERLAP_CONFIGS, []):
        if not trial[2].startswith("split"):
            yield trial
