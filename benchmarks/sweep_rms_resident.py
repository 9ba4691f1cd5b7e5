"""kernel_sweep.py families `rms_norm_resident_per_sm`, `rms_norm_resident_line`, `rms_norm_resident_pdl`,
`rms_norm_resident_wsmem`, `rms_norm_resident_ring`, `rms_norm_resident_widen` and `rms_norm_resident_narrow`.

Per SM: the built-in rms_norm's resident path at one and at two programs an SM on few wide rows (2-4 a SM), beside
the planned launch. The plan takes two an SM only where the rows fill 85% of their last round of programs (m / (rounds
x 2 SMs)); at 372 rows of 46501 (the hidden_wide draw of the last H200 campaign, 61.5% of copy there on one an SM)
that is 0.70, yet each SM holds at most 3 rows either way (2.8 on average): does the second program an SM win where
the fill by programs says no? Line: the resident kernel's windows on 16-byte vectors against windows on 128-byte
lines (LINE, planned in softmax.py after 4-14 points there). PDL: the resident launch through windows as the
built-in calls it (its weight table built every call, a launch of its own) with and without TABLE_PDL (the resident
kernel launched with programmatic dependent launch, its first row's reads overlapping the table kernel). WSMEM: the
resident kernel reading the weight of the first WS chunks from shared memory (staged once a program; through windows
each program takes one shift class of rows) instead of from L2 every row: the weight is a third of the kernel's
L2 reads, and aligned 1024 x 65536 runs about 10 points of copy behind softmax's resident kernel on the same rows;
WSHIFT with it, where the whole row's weight is staged through windows: no table and no table launch (within half a
point of the table at 372 x 46501 on the H100, evidence/h100/2026-12-06_eighteenth/1_*). RING: two sets of row slots
a program (one program an SM), so the row after next is in flight while a row's sum of squares waits on its copies:
aimed at programs of 2-4 rows (the hidden_wide draws), where a program's lone row in flight leaves HBM idle. WIDEN:
bf16 widened by a shift and a mask a pair instead of Triton's permute and shift (6-12% fewer instructions in the
sm_90 builds; through windows the kernel is short of issue slots, evidence/h100/2026-12-07_twenty_third/7_*).
Narrow: the resident kernel through windows on rows of 20001-32761, under the width the plan gives it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import torch
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref

from kernelproof_core.kernels import rms_norm

# (m, n): hidden_wide-like rows, 2-4 a SM on 132 SMs, through windows (odd widths) and aligned.
PER_SM_SHAPES = ((372, 46501), (270, 63553), (425, 52717), (400, 40001), (300, 45000), (500, 49145), (396, 40000))


def rms_norm_resident_per_sm_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The planned launch, then the resident kernel at one and two programs an SM (forced: no fill rule) where the
    rows fit, each checked against fp32 first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for m, n in PER_SM_SHAPES:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        ref = rms_norm_ref(x, w)
        yield rms_norm_planned(x, w, moved)
        for per_sm in (1, 2):
            plan = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0)
            yield from _resident_trial(x, w, y, ref, moved, "rms_norm.resident_per_sm", plan,
                                       f"per_sm={per_sm} rows/SM={m / sms:.2f}")


# (m, n): rows through windows on the resident path (the campaign's hidden_wide draws and the resident plan's sweep).
LINE_SHAPES = ((372, 46501), (476, 63343), (345, 64803), (1024, 50001), (2000, 60001), (512, 100003), (425, 52717),
               (400, 40001))


def _checked(name: str, label: str, run: Callable[[], object], y: torch.Tensor, ref: torch.Tensor,
             moved: int) -> Iterator[Trial]:
    """`run` (writing y) as a trial, where its output is within a rounding of fp32."""
    y.fill_(float("nan"))
    run()
    m, n = y.shape
    if rms_norm_close(y, ref, f"{name} {m}x{n} {label}"):
        yield (name, (m, n), label, run, moved, False)


def _resident_trial(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, ref: torch.Tensor, moved: int, name: str,
                    plan: rms_norm.Launch | None, label: str) -> Iterator[Trial]:
    """One resident launch (its weight table built once, outside the timed call) as a trial, checked first."""
    if plan is None:
        return
    m, n = x.shape
    launch, meta = plan
    wt = meta.get("WT", 0)
    table = rms_norm._weight_table(w, wt) if wt else w
    run = partial(launch, x, table, y, m, n, n, 1e-6, **meta)
    yield from _checked(name, f"{label} warps={meta['num_warps']} NCHUNK={meta['NCHUNK']}", run, y, ref, moved)


def _line_shapes(device: torch.device, dtype: torch.dtype, shapes: tuple[tuple[int, int], ...] = LINE_SHAPES,
                 ) -> Iterator[tuple[Trial, tuple[torch.Tensor, ...], int, float]]:
    """Per shape (default LINE_SHAPES): the planned launch's trial, (x, w, y, ref), the bytes a call moves, and the
    fill rule that gives a resident launch (the plan's where it takes the shape, else none: one an SM)."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for m, n in shapes:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        fill = 0.0 if rms_norm._resident_plan(m, n, n, sms, smem) is None else rms_norm._RESIDENT_MIN_FILL
        yield rms_norm_planned(x, w, moved), (x, w, y, rms_norm_ref(x, w)), moved, fill


def rms_norm_resident_line_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The planned launch, then the resident kernel (the plan's programs an SM where it takes the shape, else one an
    SM) with windows on vectors and on lines, each checked against fp32 first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for planned, (x, w, y, ref), moved, fill in _line_shapes(device, dtype):
        yield planned
        m, n = x.shape
        for line in (0, 64):
            plan = rms_norm._resident_plan(m, n, n, sms, smem, min_fill=fill, line=line)
            yield from _resident_trial(x, w, y, ref, moved, "rms_norm.resident_line", plan, f"line={line}")


def rms_norm_resident_pdl_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each LINE_SHAPES shape the resident path takes (the plan's programs an SM, else one an SM): the resident
    launch through rms_norm._run (table built every call), without and with TABLE_PDL, each checked first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for planned, (x, w, y, ref), moved, fill in _line_shapes(device, dtype):
        yield planned
        m, n = x.shape
        plan = rms_norm._resident_plan(m, n, n, sms, smem, min_fill=fill)
        if plan is None:
            continue
        for launch in (plan, rms_norm._table_pdl(plan)):
            label = (f"table_pdl={int('PDL' in launch[1])} warps={launch[1]['num_warps']} "
                     f"NCHUNK={launch[1]['NCHUNK']}")
            yield from _checked("rms_norm.resident_pdl", label, partial(rms_norm._run, launch, x, w, y, 1e-6), y,
                                ref, moved)


# Aligned rows on the resident path, one and two programs an SM (the weight itself, not a table): where the weight
# all fits beside the rows (396 x 40000, 1000 x 48000) and where it does not (the rest), 2-8 rows a program.
WSMEM_ALIGNED = ((1024, 65536), (396, 40000), (1024, 40000), (300, 45000), (1000, 48000), (512, 65536), (264, 65536),
                 (2048, 40000), (792, 40000), (1024, 32776), (120, 100000), (600, 56000), (2048, 65536))


def rms_norm_resident_wsmem_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each LINE_SHAPES shape and WSMEM_ALIGNED's: the planned launch, then the resident launch (the plan's
    programs an SM, else one an SM) through rms_norm._run (its table built every call, as the built-in calls it)
    without WSMEM, with it, and with WSHIFT too (no table) where every chunk is staged through windows, each checked
    first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for planned, (x, w, y, ref), moved, fill in (*_line_shapes(device, dtype), *_line_shapes(device, dtype,
                                                                                          WSMEM_ALIGNED)):
        yield planned
        m, n = x.shape
        for wsmem, wshift in ((False, False), (True, False), (True, True)):
            plan = rms_norm._resident_plan(m, n, n, sms, smem, min_fill=fill, wsmem=wsmem, wshift=wshift)
            if plan is None or (wshift and "WSHIFT" not in plan[1]):
                continue
            meta = plan[1]
            label = (f"wsmem={int(wsmem)} wshift={int(wshift)} WS={meta.get('WS', 0)} PERIOD={meta.get('PERIOD', 1)} "
                     f"warps={meta['num_warps']} NCHUNK={meta['NCHUNK']}")
            yield from _checked("rms_norm.resident_wsmem", label, partial(rms_norm._run, plan, x, w, y, 1e-6), y,
                                ref, moved)


def rms_norm_resident_ring_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each PER_SM_SHAPES, LINE_SHAPES and WSMEM_ALIGNED shape: the planned launch, then the resident kernel at one
    program an SM through rms_norm._run (as the built-in calls it), without RING (the plan's WSMEM rule) and with it
    (no weight staged: the second set takes that room), where two sets of the row's slots fit, and with RING_LAZY
    (the second row's copies issued once the first row's sum is in); each checked first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    shapes = tuple(dict.fromkeys((*PER_SM_SHAPES, *LINE_SHAPES, *WSMEM_ALIGNED)))
    for planned, (x, w, y, ref), moved, _fill in _line_shapes(device, dtype, shapes):
        m, n = x.shape
        ring = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, wsmem=False, ring=True)
        if ring is None or "RING" not in ring[1]:
            continue
        yield planned
        plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, ring=False)
        lazy = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, wsmem=False, ring=True, lazy=True)
        for plan in (plain, ring, lazy):
            if plan is None:
                continue
            meta = plan[1]
            label = (f"ring={int('RING' in meta)} lazy={int('RING_LAZY' in meta)} WS={meta.get('WS', 0)} "
                     f"rows/program={m / min(m, sms):.2f} "
                     f"NCHUNK={meta['NCHUNK']}")
            yield from _checked("rms_norm.resident_ring", label, partial(rms_norm._run, plan, x, w, y, 1e-6), y, ref,
                                moved)


def rms_norm_resident_widen_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each LINE_SHAPES, PER_SM_SHAPES and WSMEM_ALIGNED shape: the planned launch, then the resident launch (the
    plan's, else one an SM) through rms_norm._run without and with WIDEN, each checked first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    shapes = tuple(dict.fromkeys((*LINE_SHAPES, *PER_SM_SHAPES, *WSMEM_ALIGNED)))
    for planned, (x, w, y, ref), moved, fill in _line_shapes(device, dtype, shapes):
        yield planned
        m, n = x.shape
        for widen in (False, True):
            plan = rms_norm._resident_plan(m, n, n, sms, smem, min_fill=fill, widen=widen)
            if plan is None:
                continue
            meta = plan[1]
            label = (f"widen={int(widen)} warps={meta['num_warps']} NCHUNK={meta['NCHUNK']} WS={meta.get('WS', 0)} "
                     f"ring={int('RING' in meta)}")
            yield from _checked("rms_norm.resident_widen", label, partial(rms_norm._run, plan, x, w, y, 1e-6), y, ref,
                                moved)


# (m, n): contiguous rows off the 16-byte grid of 24577-32768, which the plan gave the two-phase path (hidden_wide draws
# of that width, mostly under 64 MB; the two-phase path's ceiling on the H200 is 57-70% of copy), and two of
# 16385-24576 (the split path). Since evidence/h100/2026-12-07_twenty_seventh/2_* the plan takes the resident path
# from 20001 wide (rms_norm._RESIDENT_WINDOWS_MIN_N), so "planned" is the resident rule's launch where it applies.
NARROW_SHAPES = ((510, 32083), (300, 28001), (700, 30001), (512, 32761), (1024, 24577), (2000, 30001), (1024, 20001),
                 (480, 26003))


def rms_norm_resident_narrow_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `rms_norm_resident_narrow`: the resident kernel through windows under _RESIDENT_MIN_N (32768), where the
    plan takes the two-phase path (from 24577) or the split: the planned launch, then the resident plan by its own
    rule (two programs an SM where two rows fit and fill 85% of their last round) and forced to one and to two
    programs an SM, each through rms_norm._run as the built-in calls it (its weight table built every call, as the
    two-phase path's is), checked against fp32 first."""
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for m, n in NARROW_SHAPES:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        ref = rms_norm_ref(x, w)
        yield rms_norm_planned(x, w, moved)
        seen: list[dict[str, int]] = []
        for label, kw in (("rule", {}), ("per_sm=1", {"per_sm": 1, "min_fill": 0.0}),
                          ("per_sm=2", {"per_sm": 2, "min_fill": 0.0})):
            plan = rms_norm._resident_plan(m, n, n, sms, smem, **kw)  # type: ignore[arg-type]
            if plan is None or plan[1] in seen:  # the rule's own count is timed once
                continue
            seen.append(plan[1])
            run = partial(rms_norm._run, plan, x, w, y, 1e-6)
            yield from _checked("rms_norm.resident_narrow", f"{label} warps={plan[1]['num_warps']} "
                                f"NCHUNK={plan[1]['NCHUNK']}", run, y, ref, moved)
