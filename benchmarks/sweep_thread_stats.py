"""kernel_sweep.py family `softmax_thread_stats`: the realigned softmax kernel with and without THREAD_STATS.

The realigned kernel's two-reduction form reduces each row twice across its CTA: the max, then the sum of
exponentials taken against it. Each reduction ends in shared memory behind barriers where every warp of the program
waits (3 a reduction in an sm_90 build, 18 a row on a window of three parts), and with one 16-warp program resident an
SM (128 registers a thread) nothing else runs on the SM meanwhile. THREAD_STATS keeps each thread's own (max, sum of
exp against it), merges each warp's threads by the warp's max, merges the warps' pairs in one reduction and rescales
each thread's exponentials by exp(its max - the row's) / sum, with exponentials as ex2.approx.ftz (no fix-up for
results under 2^-126): at 32768 lanes on 16 warps 1152 instructions a thread against 1280, 3 barriers against 6.

The sessions' runs (evidence/h200/2026-12-04_thread_stats/): 1_*, 3_*, 4_* timed a first form (pairs merged at every
shuffle step, tl.exp) at commits 3c3ada5-7d6eecb; 7_*, 8_* timed family `softmax_exp_forms` at 8682c81, which put
the warps-first merge (WARP_FIRST) and the ex2.ftz exponentials (FTZ) beside it as options: both together won at
every bf16 shape, and are the shipped THREAD_STATS (same sm_90 SASS at five configs); the options were folded in
afterwards, and with them that family. FTZ alone on the two-reduction form lost on the 32768-lane window (2048 x 32000
85.9% of copy against 88.7%).

Per shape: the planned launch, its config, and its config with THREAD_STATS turned the other way (on: on the parts
_thread_stats_parts would take, or the planned ones where each holds a vector a thread, else _thread_parts'),
THREAD_STATS with its exponentials held in fp16 (HALF_EXPS), and (16-warp windows of parts >= 8192 lanes)
THREAD_STATS on one 32-warp program an SM, with and without HALF_EXPS; each launch checked against fp32 before it is
timed. Shapes: contiguous 16-bit rows on realigned plans. evidence/h200/2026-12-04_half_exps/1_* (at 376505a):
HALF_EXPS won on fp16 16384+4096 lanes only (4096 x 20480 84.2% of copy against 75.1%; planned since f60a2e2) and
lost 10-12 points on 32768 lanes in both dtypes; the 32-warp program was within about a point of the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_padded import _checked, padded_inputs

from kernelproof_core.kernels import softmax

# (rows, width): the campaigns' one-window realigned cases first, then window parts, narrow configs
SHAPES = ((2048, 32000), (2048, 32768), (1723, 25249), (793, 28518), (2048, 32001), (4096, 32768), (1024, 20001),
          (4096, 8185), (2048, 16377), (1024, 32768), (2048, 30001), (2048, 18001), (4096, 20480), (700, 17001),
          (700, 24001), (2048, 22001), (2048, 24576), (2048, 14500), (4096, 16383), (1000, 15001), (3373, 7683),
          (3617, 2577), (1673, 3185), (4096, 3000), (4096, 5000), (3921, 6608), (8192, 8191))


def _grid(launch: object) -> int:
    """The programs of a planned launch (a persistent one's grid as planned, before its build's cap; `kernel[grid]`
    keeps its grid in the proxy's closure)."""
    if isinstance(launch, softmax._Persistent):
        return launch.programs
    for cell in getattr(launch, "__closure__", None) or ():
        if isinstance(cell.cell_contents, tuple):
            return int(cell.cell_contents[0])
    raise ValueError("not a kernel[grid] launch")


def _label(warps: int, parts: tuple[int, int, int], grid: int) -> str:
    return f"w{warps} parts={'+'.join(str(p) for p in parts if p)} grid={grid}"


def softmax_thread_stats_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in SHAPES:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1] or plan[1].get("PF_L1"):
            continue  # not the realigned kernel (or PF_L1: THREAD_STATS with it is softmax_thread_stats_pf_l1's)
        launch, meta = plan
        warps = meta["num_warps"]
        threads = 32 * warps
        grid = _grid(launch)
        planned = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        if meta.get("THREAD_STATS"):
            other = {**meta, "THREAD_STATS": 0}
            parts = softmax._parts(n, x.element_size())  # the window the two-reduction plan takes
            other.update(WINDOW=parts[0], PART1=parts[1], PART2=parts[2])
            name = _label(warps, parts, grid) + " two reductions"
        else:
            parts = softmax._thread_stats_parts(n, x.element_size(), planned, warps, torch.bfloat16)
            if parts is None:
                eligible = min(p for p in planned if p) >= threads * meta["VEC"]
                parts = planned if eligible else softmax._thread_parts(n, x.element_size(), threads)
            other = {**meta, "WINDOW": parts[0], "PART1": parts[1], "PART2": parts[2], "THREAD_STATS": threads}
            name = _label(warps, parts, grid) + " thread_stats"
        tag = " thread_stats" if meta.get("THREAD_STATS") else ""
        yield from _checked(partial(launch, x, y, m, n, n, **meta), y, ref, "softmax.realigned", (m, n),
                            _label(warps, planned, grid) + tag + " (planned config)", moved)
        yield from _checked(partial(launch, x, y, m, n, n, **other), y, ref, "softmax.realigned", (m, n), name, moved)
        ts = planned if meta.get("THREAD_STATS") else parts
        ts_meta = meta if meta.get("THREAD_STATS") else other
        # THREAD_STATS with its exponentials held in fp16 while the row's (max, sum) is merged (HALF_EXPS): at 32768
        # lanes on 16 warps an fp16 sm_90 build spills 4 bytes against 52
        yield from _checked(partial(launch, x, y, m, n, n, **{**ts_meta, "HALF_EXPS": True}), y, ref,
                            "softmax.realigned", (m, n), _label(warps, ts, grid) + " thread_stats half_exps", moved)
        if warps == 16 and min(p for p in ts if p) >= 32 * 32 * meta["VEC"]:
            # one 32-warp program an SM on the same window: 64 registers a thread for 32768 lanes (bf16 no spills in
            # an sm_90 build, fp16 20 bytes, none with HALF_EXPS), twice the warps of the 16-warp program the plan's
            # 128 registers leave alone on an SM
            wide, wmeta = softmax._realigned_plan(m, n, n, x.element_size(), softmax._num_sms(device), 1, 32, False, ts)
            for half in (False, True):
                yield from _checked(partial(wide, x, y, m, n, n, **{**wmeta, "THREAD_STATS": 1024, "HALF_EXPS": half}),
                                    y, ref, "softmax.realigned", (m, n),
                                    _label(32, ts, _grid(wide)) + " thread_stats" + " half_exps" * half, moved)


# the campaigns' 25249-32768 one-window cases, where fp16's THREAD_STATS spills holding the next row in registers
PF_L1_SHAPES = ((2048, 32000), (2048, 32768), (1723, 25249), (2048, 32001), (4096, 32768))


def softmax_thread_stats_pf_l1_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_thread_stats_pf_l1`: THREAD_STATS with the next row prefetched into L1 (PF_L1) instead of held
    in registers, on one 32768-lane window, beside the planned launch. fp16's THREAD_STATS build holds the next row in
    registers and spills 52 bytes there (sm_90), bf16's fits 128 registers; with PF_L1 neither spills (16 warps: 126
    and 127 registers; 32 warps: 62 and 63). Each launch checked against fp32 before it is timed.
    evidence/h200/2026-12-04_half_exps/5_* (at d906a00): PF_L1 cost 6-7 points in bf16 (2048 x 32000 84.3% of copy
    against 91.3%); fp16 lost its spill (84.8% against 69.9%) and stayed behind the planned two reductions (88.4%)."""
    for m, n in PF_L1_SHAPES:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        n_sm = softmax._num_sms(device)
        for warps, per_sm in ((16, 2), (32, 1)):
            launch, meta = softmax._realigned_plan(m, n, n, x.element_size(), n_sm, per_sm, warps, False,
                                                   (32768, 0, 0))
            for pf in (False, True):
                ts = {**meta, "THREAD_STATS": 32 * warps, "PF_L1": pf}
                yield from _checked(partial(launch, x, y, m, n, n, **ts), y, ref, "softmax.realigned", (m, n),
                                    _label(warps, (32768, 0, 0), _grid(launch)) + " thread_stats" + " pf_l1" * pf,
                                    moved)


# rows of 24577-28665 positions (plus one 28672-wide): the campaigns' `random0` (1723 x 25249) and 793 x 28518 first
THREE_PART_SHAPES = ((1723, 25249), (793, 28518), (2048, 24577), (2048, 26001), (1024, 27000), (4096, 25000),
                     (2048, 28001), (2048, 28672))


def softmax_thread_stats_parts_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_thread_stats_parts`: rows of 24577-28665 positions on THREAD_STATS' three parts of whole vectors
    a thread (16384+8192+4096: 28672 lanes, _thread_parts) in place of the planned 32768-lane window, 16 warps, x read
    as words and not. The two-reduction form measured slower on parts past 16384 positions (1723 x 25249 70.5% of
    copy on 16384+8192+2048 against 78.7% on 32768), but THREAD_STATS on two parts won over its own one window
    (4096 x 20480 on 16384+4096); with one window, 1723 x 25249 leaves 23% of its lanes idle (12% on three parts).
    sm_90 builds: 127 registers bf16, 123 fp16, no spills (128 and 128 on 32768 lanes). Each launch checked against
    fp32 before it is timed."""
    if dtype not in (torch.float16, torch.bfloat16):
        return
    n_sm = softmax._num_sms(device)
    for m, n in THREE_PART_SHAPES:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        cut = softmax._thread_parts(n, x.element_size(), 512)
        for parts in ((32768, 0, 0), cut):
            launch, meta = softmax._realigned_plan(m, n, n, x.element_size(), n_sm, 2, 16, False, parts)
            for words in (True, False):
                run = partial(launch, x, y, m, n, n, **{**meta, "THREAD_STATS": 512, "WORDS": words})
                yield from _checked(run, y, ref, "softmax.realigned", (m, n),
                                    _label(16, parts, _grid(launch)) + " thread_stats" + " words" * words, moved)


# 16-bit rows of 9001-16377 positions on windows THREAD_STATS was never swept on: 16 warps under 16384 lanes
# (8192+4096, the campaigns' `hidden_spike` 1940 x 12074 at 76-78% in padded_words/2_*; 8192+2048) and three parts on
# 8 warps (8192+4096+2048: 1960 x 13778, 2000 x 12345)
UNSWEPT_SHAPES = ((1940, 12074), (2048, 12001), (4096, 12288), (1960, 13778), (2000, 12345), (2048, 14001),
                  (2048, 10001), (4096, 10240), (2048, 16377))


def softmax_thread_stats_unswept_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_thread_stats_unswept`: the planned launch, its config, and THREAD_STATS on the planned window
    and warps (each part holds a vector a thread, else _thread_parts' cut), x read as words and not, beside the
    planned config with words turned the other way. Each launch checked against fp32 before it is timed."""
    if dtype not in (torch.float16, torch.bfloat16):
        return
    for m, n in UNSWEPT_SHAPES:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1]:
            continue  # not the realigned kernel
        launch, meta = plan
        warps, grid = meta["num_warps"], _grid(launch)
        planned = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        tags = "".join(f" {k.lower()}" for k in ("THREAD_STATS", "WORDS") if meta.get(k))
        yield from _checked(partial(launch, x, y, m, n, n, **meta), y, ref, "softmax.realigned", (m, n),
                            _label(warps, planned, grid) + tags + " (planned config)", moved)
        flipped = {**meta, "WORDS": not meta.get("WORDS")}
        yield from _checked(partial(launch, x, y, m, n, n, **flipped), y, ref, "softmax.realigned", (m, n),
                            _label(warps, planned, grid) + tags.replace(" words", "") + " words" * flipped["WORDS"],
                            moved)
        if meta.get("THREAD_STATS"):
            continue
        eligible = min(p for p in planned if p) >= 32 * warps * 16 // x.element_size()
        parts = planned if eligible else softmax._thread_parts(n, x.element_size(), 32 * warps)
        ts_launch, ts_meta = softmax._realigned_plan(m, n, n, x.element_size(), softmax._num_sms(device),
                                                     grid // softmax._num_sms(device) or 1, warps, False, parts)
        for words in (True, False):
            run = partial(ts_launch, x, y, m, n, n, **{**ts_meta, "THREAD_STATS": 32 * warps, "WORDS": words})
            yield from _checked(run, y, ref, "softmax.realigned", (m, n),
                                _label(warps, parts, _grid(ts_launch)) + " thread_stats" + " words" * words, moved)
