"""Experiment: rms_norm rows wider than 32768 held in shared memory, as softmax's resident path holds them
(kernelproof_core/kernels/softmax.py, _softmax_resident). Shipped since 1a47d9b as rms_norm.py's resident path
(_rms_norm_resident: FREE copies, the shifted weight table through windows, two 16-warp programs an SM where two
rows fit or one 32-warp program, planned where rows fill 85% of their last round); this kernel stays for the
variants measured on the way (softmax's resident plan's configs, copies with barriers, the weight element by
element) beside it.

Why: 16-bit rms_norm rows wider than 32768 take the split path (one program per chunk, partial sums of squares met
through a per-row counter): 41-67% of copy bandwidth on the H200, and 43-45% for unaligned widths (the campaign's
hidden_wide draw 425 x 52717, evidence/h200/2026-12-02_owed_checks/4_campaign/). Softmax rows of the same widths
reach 76-84% on the resident kernel. rms_norm has the same two passes over a row (sum of squares, then scale), with
no exponentials and a weight read in the second.

The kernel: a persistent program keeps its row in shared memory, filled by cp.async (16-byte copies, or the row's
vector window for contiguous rows off the 16-byte grid: REALIGN, the edge vectors read and written element by
element); the stats pass sums squares chunk by chunk as each copy group lands; the output pass reads chunk c back,
refills its slot with the next row's chunk c, multiplies by rsqrt(mean + eps) and the weight (read from global
memory, L1/L2-resident: with REALIGN at w[p - shift], element by element) and stores. Configs (programs per SM,
warps, chunks held) come from softmax._resident_plan, the same shared-memory budget. It reuses softmax.py's copy
and mask helpers; a shipped version would carry its own (a candidate is one file).

Family `rms_norm_resident` (kernel_sweep.py): planned (split) against this kernel over warps and programs per SM,
each config checked against fp32 before it is timed. On the H200 (bf16, CUPTI,
evidence/h200/2026-12-02_carry_rms_resident/1_*) it beat the split path only on aligned rows with many rows a program
(1024 x 40000 69.7% against 65.6%, 1024 x 65536 72.9% against 70.2%) and the hidden_wide draw a little (425 x 52717
45.7% against 43.2%), and lost on the rest (270 x 63553 35.6% against 41.8%, 345 x 64803 43.2% against 43.5%,
800 x 60000 63.4% against 65.8%, 512 x 100000 64.3% against 68.3%): not shipped.

Family `rms_norm_split_window`: the split path for 16-bit rows off the 16-byte grid through their vector windows
(_rms_norm_split's REALIGN, planned) against its scalar accesses (as before), over chunk and warps, and the planned
launch (its weight from a table of the weight shifted by 0-7, built every call, WT > 0: 16-byte weight reads) against
the weight read from w - shift (WT=-1) or element by element (WT=0). The table gained 1.4 to 4.7 points of copy over
WT=0 at five of six shapes and lost 1.0 at 270 x 63553 (evidence/h200/2026-12-02_in_vec_table/1_*). The planned split
with the weight loaded before the rendezvous (EARLY_W, removed after evidence/h200/2026-12-02_pending_runs/1_*) lost
0.8-7.4 points on 10 of 11 shapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

from kernelproof_core.kernels import rms_norm, softmax
from kernelproof_core.kernels.softmax import _fetch, _fetch_free, _masked_chunk, _stagger, _wait_asm, _whole


@gluon.jit
def _w_at(w_ptr: gl.tensor, cols: gl.tensor, sh: gl.tensor, WT: gl.constexpr) -> gl.tensor:
    # The weight's address at window positions `cols` of a row starting sh into its first vector.
    if WT > 0:
        at = w_ptr + (sh * WT + cols)
    else:
        at = w_ptr + (cols - sh)
    return at


@gluon.jit
def _rms_norm_resident(x_ptr: gl.tensor, w_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                       stride_x: gl.tensor, eps: gl.tensor, NCHUNK: gl.constexpr, NRES: gl.constexpr,
                       K: gl.constexpr, ALIGN: gl.constexpr, REALIGN: gl.constexpr = False,
                       STAGGER: gl.constexpr = 0, WT: gl.constexpr = 0, FREE: gl.constexpr = False) -> None:
    # WT > 0 (REALIGN): w_ptr is rms_norm._weight_table's table, rows of WT window positions, so the weight at window
    # position p of a row starting sh into its vector is w_ptr[sh WT + p], read 16 bytes wide (WT = 0: w[p - sh],
    # element by element, as first measured). FREE: softmax's FREE, the copies and waits without CTA barriers.
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W
    CHUNK: gl.constexpr = T * K
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    slots = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NRES, T, K], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    offs = (gl.arange(0, T, layout=rows_layout) * K)[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[
        None, :]
    lane = gl.arange(0, T, layout=rows_layout)
    if FREE:  # this thread's vector in slot 0 (the slots are the kernel's first allocation)
        smem = gl.inline_asm_elementwise("mov.u32 $0, global_smem;", "=r,r", [lane], dtype=gl.int32, is_pure=True,
                                         pack=1) + lane * 16
    else:
        smem = lane
    if STAGGER > 0:
        _stagger(STAGGER, rows_layout)
    step = gl.num_programs(0)
    row = gl.program_id(0)
    if REALIGN:
        start = row.to(gl.int64) * N
        base = (start // K) * K
        sh = (start - base).to(gl.int32)
        x_row = x_ptr + base
        e_pos = gl.arange(0, 2, layout=rows_layout)
        e_cols = gl.arange(0, K, layout=gl.SliceLayout(0, layout))[None, :]
    else:
        sh = 0
        x_row = x_ptr + row.to(gl.int64) * stride_x
    for c in gl.static_range(NRES):
        if FREE:
            _fetch_free(smem, c, x_row, lane, sh, N, row < M, x_ptr, K, CHUNK)
        elif REALIGN:
            _fetch(slots.index(c), x_row, c * CHUNK + offs, N, row < M, c == 0 or c >= NCHUNK - 2,
                   _whole(c, T, K, sh, N, rows_layout))
        else:
            _fetch(slots.index(c), x_row, c * CHUNK + offs, N, row < M, c == NCHUNK - 1, c * CHUNK + offs < N)
    while row < M:
        if REALIGN:
            base = (row.to(gl.int64) * N // K) * K
            sh = (row.to(gl.int64) * N - base).to(gl.int32)
            x_row = x_ptr + base
            y_row = y_ptr + base
            e_start = gl.where(e_pos == 0, 0, ((sh + N - 1) // K) * K)[:, None]
            e_offs = e_start + e_cols
            e_inside = (e_start >= sh) & (e_start + K <= sh + N)
            e_mask = (e_offs >= sh) & (e_offs < sh + N) & ~e_inside
            x_e = gl.load(x_row + e_offs, mask=e_mask, other=0.0).to(gl.float32)
        else:
            x_row = x_ptr + row.to(gl.int64) * stride_x
            y_row = y_ptr + row.to(gl.int64) * N
        ss_t = gl.zeros([T], gl.float32, rows_layout)
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            if _masked_chunk(c, NCHUNK, REALIGN):
                keep = _whole(c, T, K, sh, N, rows_layout) if REALIGN else cols < N
            if c < NRES:
                if FREE:
                    gl.inline_asm_elementwise(_wait_asm(NRES - 1 - c), "=r,r", [lane], dtype=gl.int32, is_pure=False,
                                              pack=1)
                else:
                    cp.wait_group(NRES - 1 - c)
                x = slots.index(c).load(layout).to(gl.float32)
                if _masked_chunk(c, NCHUNK, REALIGN):
                    x = gl.where(keep, x, 0.0)
            elif _masked_chunk(c, NCHUNK, REALIGN):
                x = gl.load(x_row + cols, mask=keep, other=0.0, eviction_policy="evict_last").to(gl.float32)
            else:
                x = gl.load(x_row + cols, eviction_policy="evict_last").to(gl.float32)
            ss_t += gl.sum(x * x, axis=1)
        total = gl.sum(ss_t, axis=0)
        if REALIGN:
            total += gl.sum(gl.sum(x_e * x_e, axis=1), axis=0)
        inv = gl.rsqrt(total / N + eps)
        ahead = row + step
        live = ahead < M
        if REALIGN:
            a_base = (ahead.to(gl.int64) * N // K) * K
            a_sh = (ahead.to(gl.int64) * N - a_base).to(gl.int32)
            a_row = x_ptr + a_base
        else:
            a_sh = 0
            a_row = x_ptr + ahead.to(gl.int64) * stride_x
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            if _masked_chunk(c, NCHUNK, REALIGN):
                keep = _whole(c, T, K, sh, N, rows_layout) if REALIGN else cols < N
            if c < NRES:
                x = slots.index(c).load(layout).to(gl.float32)
                if FREE:
                    _fetch_free(smem, c, a_row, lane, a_sh, N, live, x_ptr, K, CHUNK)
                else:
                    _fetch(slots.index(c), a_row, cols, N, live, _masked_chunk(c, NCHUNK, REALIGN),
                           _whole(c, T, K, a_sh, N, rows_layout) if REALIGN else cols < N)
            elif _masked_chunk(c, NCHUNK, REALIGN):
                x = gl.load(x_row + cols, mask=keep, other=0.0, eviction_policy="evict_first").to(gl.float32)
            else:
                x = gl.load(x_row + cols, eviction_policy="evict_first").to(gl.float32)
            if _masked_chunk(c, NCHUNK, REALIGN):
                w = gl.load(_w_at(w_ptr, cols, sh, WT), mask=keep, other=0.0).to(gl.float32)
                gl.store(y_row + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=keep)
            else:
                w = gl.load(_w_at(w_ptr, cols, sh, WT)).to(gl.float32)
                gl.store(y_row + cols, (x * inv * w).to(y_ptr.dtype.element_ty))
        if REALIGN:
            w_e = gl.load(_w_at(w_ptr, e_offs, sh, WT), mask=e_mask, other=0.0).to(gl.float32)
            gl.store(y_row + e_offs, (x_e * inv * w_e).to(y_ptr.dtype.element_ty), mask=e_mask)
        row = ahead
    cp.wait_group(0)


def rms_norm_resident(x: torch.Tensor, w: torch.Tensor, eps: float, y: torch.Tensor, warps: int = 0,
                      per_sm: int = 0, table: bool = True, free: bool = True) -> torch.Tensor:
    """RMSNorm of a 2-D 16-bit x on the resident kernel: softmax._resident_plan's config for the same rows (REALIGN
    for contiguous rows off the 16-byte grid; two programs per SM where two rows fit the budget). table: REALIGN's
    weight from rms_norm._weight_table (built every call, as the built-in's realigned paths build it); free: FREE."""
    m, n = x.shape
    es, stride = x.element_size(), x.stride(0)
    align = softmax._align(es, n, stride)
    index = softmax._cuda_index(x.device)
    sms, smem = softmax._cuda_sms(index), softmax._smem_per_sm(index)
    realign = align * es < 16 and stride == n
    span = n + 16 // es - 1 if realign else n
    per_sm = per_sm or (2 if 2 * span * es <= softmax._resident_budget(smem) else 1)
    plan = softmax._resident_plan(m, n, align, es, sms, smem, warps, 0, per_sm, realign=realign, free=free,
                                  line=0)  # this kernel's windows start on vectors
    if plan is None:
        raise ValueError(f"{m} x {n} (stride {stride}): not a resident shape")
    meta = {k: v for k, v in plan[1].items() if k not in ("CARRY", "KEEP", "HOLD", "ANCHOR")}  # softmax's own options
    weight = w
    if realign and table:
        meta["WT"] = meta["NCHUNK"] * 32 * meta["num_warps"] * meta["K"]
        weight = rms_norm._weight_table(w, meta["WT"])
    _rms_norm_resident[(min(m, per_sm * sms),)](x, weight, y, m, n, stride, eps, **meta)
    return y


SHAPES = ((476, 63343), (345, 64803), (270, 63553), (1024, 50001), (425, 52717), (2000, 60001), (1024, 65536),
          (1024, 40000), (512, 100003), (264, 114000), (396, 33001), (512, 40001), (1024, 45000), (480, 36001),
          (250, 45001), (1000, 48000))
# (warps, programs an SM, weight table, FREE); 0 warps: softmax's resident plan's. The first sweep (H100,
# evidence/h100/2026-12-06_rms_resident/1_*) also had the plan's warps without the table or without FREE (4-19 points
# behind with both), 32 warps (rms_norm.py's resident path since) and 8 warps two an SM (behind everywhere).
CONFIGS = ((0, 1, True, True), (16, 2, True, True))


def rms_norm_resident_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `rms_norm_resident`: rows of 33001-114000 (aligned and not) on this experiment's kernel (softmax's
    resident plan's configs) against the planned launch (rms_norm.py's resident path where it applies) and the plan
    without it (two-phase or split path)."""
    for m, n in SHAPES:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        ref = rms_norm_ref(x, w)
        before = rms_norm._plan(m, n, n, x.element_size(), device, resident=False)
        kind = {rms_norm._Split: "split", rms_norm._TwoPhase: "two_phase"}.get(type(before), "rows")
        others: list[tuple[str, str, rms_norm.Plan]] = [("rms_norm.before", kind, before)]
        sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
        planned = rms_norm._resident_config(m, n, n, sms, smem)
        for per_sm in (1, 2):  # the shipped kernel at the count the plan did not take (fill rule set aside)
            shipped = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0)
            if shipped is not None and (planned is None or planned[1] != shipped[1]):
                others.append(("rms_norm.shipped", f"per_sm={per_sm} warps={shipped[1]['num_warps']}", shipped))
        for family, label, plan in others:
            run = partial(rms_norm._run, plan, x, w, y, 1e-6)
            y.fill_(float("nan"))
            run()
            if rms_norm_close(y, ref, f"{family} {m}x{n} {label}"):
                yield (family, (m, n), label, run, moved, False)
        for warps, per_sm, table, free in CONFIGS:
            label = f"warps={warps or 'plan'} per_sm={per_sm} table={int(table)} free={int(free)}"
            run = partial(rms_norm_resident, x, w, 1e-6, y, warps, per_sm, table, free)
            try:
                y.fill_(float("nan"))
                run()
            except ValueError as exc:  # a chunk larger than the budget
                print(f"rms_norm.resident {m}x{n} {label}: {exc}", flush=True)
                continue
            if not rms_norm_close(y, ref, f"rms_norm.resident {m}x{n} {label}"):
                continue
            yield ("rms_norm.resident", (m, n), label, run, moved, False)


WINDOW_SHAPES = ((425, 52717), (345, 64803), (270, 63553), (2048, 24577), (512, 40001), (1000, 16411))


def _window_split(m: int, n: int, chunk: int, warps: int) -> rms_norm._Split:
    n_parts = -(-(n + 7) // chunk)
    return rms_norm._Split(rms_norm._rms_norm_split[(m * n_parts,)], {
        "CHUNK": chunk, "ALIGN": 8, "REALIGN": True, "BLOCK_S": max(2, 1 << (n_parts - 1).bit_length()),
        "num_warps": warps}, n_parts)


def _run_split(split: rms_norm._Split, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, parts: torch.Tensor,
               done: torch.Tensor) -> None:
    done.zero_()
    wt = split.meta.get("WT", 0)
    weight = rms_norm._weight_table(w, wt) if wt > 0 else w  # built every call: the weight may change between calls
    split.launch(x, weight, y, parts, done, x.shape[1], x.stride(0), 1e-6, split.n_parts, **split.meta)


def rms_norm_split_window_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `rms_norm_split_window`: contiguous 16-bit rows off the 16-byte grid on the split path through their
    vector windows (planned) against scalar accesses (the plan before) and other chunks and warps, each launch
    checked against fp32 before it is timed (a fresh per-row counter each call, as the built-in allocates)."""
    for m, n in WINDOW_SHAPES:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        ref = rms_norm_ref(x, w)
        es = x.element_size()
        planned = rms_norm._split_plan(m, n, n, es, rms_norm._align(es, n, n))
        splits = [("scalar (before)", rms_norm._split_plan(m, n, n, es, rms_norm._align(es, n, n), realign=False)),
                  ("planned, weight from w - shift (WT=-1)", planned._replace(meta={**planned.meta, "WT": -1})),
                  ("planned, weight element by element (WT=0)", planned._replace(meta={**planned.meta, "WT": 0}))]
        splits += [(f"window chunk={c} warps={wp}", _window_split(m, n, c, wp))
                   for c, wp in ((4096, 2), (8192, 4))]
        for label, split in splits:
            parts = torch.empty((m, split.n_parts), dtype=torch.float32, device=device)
            run = partial(_run_split, split, x, w, y, parts, torch.zeros((m,), dtype=torch.int32, device=device))
            y.fill_(float("nan"))
            run()
            if not rms_norm_close(y, ref, f"rms_norm.split_window {m}x{n} {label}"):
                continue
            yield ("rms_norm.split_window", (m, n), label, run, moved, False)
