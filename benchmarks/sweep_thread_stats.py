"""kernel_sweep.py family `softmax_thread_stats`: THREAD_STATS on the realigned softmax kernel.

The realigned kernel reduces each row twice across its CTA: the max, then the sum of exponentials taken against it.
Each reduction ends in shared memory behind barriers where every warp of the program waits (3 a reduction in an
sm_90 build), and with one 16-warp program resident an SM (128 registers a thread) nothing else runs on the SM
meanwhile. THREAD_STATS keeps each thread's own (max, sum of exp against it), merges the threads' pairs in one
reduction and rescales each thread's exponentials by exp(its max - the row's) / sum: half the barriers (3 against 6
at 32768 lanes on 16 warps), 21 more exponentials a thread (86 against 65: the merges), no spills. Shapes: the
campaigns' one-window realigned cases under 90% of copy (vocab_32000, long_32768, random0, hidden_offset), 4096 x
32768 (90-92% already) and the one-window windows of 8192 and 16384 lanes the narrow configs run. Per shape: the
planned launch, its config, the config with THREAD_STATS, with THREAD_STATS on the window in parts of whole vectors
a thread where that takes fewer lanes (softmax._thread_parts: 25249 on 16384+8192+4096 lanes, 3 barriers a row
against 18 for the two-reduction form on those parts), and all of them on one program an SM where the plan has two;
each launch is checked against fp32 before it is timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_padded import _checked, padded_inputs

from kernelproof_core.kernels import softmax

# (rows, width): contiguous 16-bit rows on realigned plans (run 2 adds all but the first group)
SHAPES = ((2048, 32000), (2048, 32768), (1723, 25249), (793, 28518), (2048, 32001), (4096, 32768), (1024, 20001),
          (4096, 8185), (2048, 16377))
WIDER = ((1024, 32768), (2048, 30001), (2048, 18001), (4096, 20480), (700, 17001), (700, 24001), (2048, 22001),
         (2048, 24576), (2048, 14500), (4096, 16383), (1000, 15001), (3373, 7683), (3617, 2577), (1673, 3185),
         (4096, 3000), (4096, 5000), (3921, 6608), (8192, 8191))


def _grid(launch: object) -> int:
    """The programs of a planned launch (`kernel[grid]` keeps its grid in the proxy's closure)."""
    for cell in getattr(launch, "__closure__", None) or ():
        if isinstance(cell.cell_contents, tuple):
            return int(cell.cell_contents[0])
    raise ValueError("not a kernel[grid] launch")


def _label(warps: int, parts: tuple[int, int, int], grid: int) -> str:
    return f"w{warps} parts={'+'.join(str(p) for p in parts if p)} grid={grid}"


def softmax_thread_stats_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    sms = softmax._num_sms(device)
    for m, n in SHAPES + WIDER:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1] or plan[1].get("PF_L1"):
            continue  # not the realigned kernel (or PF_L1, which THREAD_STATS does not take)
        launch, meta = plan
        warps = meta["num_warps"]
        threads = 32 * warps
        planned = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        cuts = [planned] if min(p for p in planned if p) >= threads * meta["VEC"] else []
        cut = softmax._thread_parts(n, x.element_size(), threads)
        cuts += [cut] if cut != planned else []
        grid = _grid(launch)
        for g in (grid, min(m, sms)) if grid > sms else (grid,):
            run = softmax._softmax_realigned[(g,)]
            yield from _checked(partial(run, x, y, m, n, n, **meta), y, ref, "softmax.realigned", (m, n),
                                _label(warps, planned, g) + (" (planned config)" if g == grid else ""), moved)
            for parts in cuts:
                ts = {**meta, "WINDOW": parts[0], "PART1": parts[1], "PART2": parts[2], "THREAD_STATS": threads}
                yield from _checked(partial(run, x, y, m, n, n, **ts), y, ref, "softmax.realigned", (m, n),
                                    _label(warps, parts, g) + " thread_stats", moved)


def softmax_exp_forms_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_exp_forms`: on the same shapes, the realigned launch as planned, then its config (one
    reduction a row or two, as planned) with FTZ (exponentials as exp2, ex2.approx.ftz: 1088 instructions a thread
    against 1280 in an sm_90 build of the 32768-lane window), and THREAD_STATS on the planned parts (or
    _thread_parts') alone, with WARP_FIRST (warps merged after their threads: 77 exponentials a thread against 86) and
    with both (1152 instructions against 1448). Planned grid only; each launch checked against fp32 first."""
    for m, n in SHAPES + WIDER:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1] or plan[1].get("PF_L1"):
            continue
        launch, meta = plan
        warps = meta["num_warps"]
        threads = 32 * warps
        planned = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        parts = (planned if min(p for p in planned if p) >= threads * meta["VEC"] else
                 softmax._thread_parts(n, x.element_size(), threads))
        grid = _grid(launch)
        ts = {**meta, "WINDOW": parts[0], "PART1": parts[1], "PART2": parts[2], "THREAD_STATS": threads}
        label = _label(warps, planned, grid) + (" thread_stats" if meta.get("THREAD_STATS") else "")
        for name, variant in ((f"{label} (planned config)", meta), (f"{label} ftz", {**meta, "FTZ": True}),
                              (_label(warps, parts, grid) + " thread_stats", ts),
                              (_label(warps, parts, grid) + " thread_stats warp_first", {**ts, "WARP_FIRST": True}),
                              (_label(warps, parts, grid) + " thread_stats warp_first ftz",
                               {**ts, "WARP_FIRST": True, "FTZ": True})):
            yield from _checked(partial(launch, x, y, m, n, n, **variant), y, ref, "softmax.realigned", (m, n), name,
                                moved)
