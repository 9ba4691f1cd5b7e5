"""kernel_sweep.py family `softmax_padded`: 16-bit softmax rows whose row padding is not a whole number of vectors (the
hidden `odd` profile's draws: 46-67% of copy in the campaigns before the plan below), so x's rows start off the
output's vector grid and x is read at most ALIGN_X elements at a time. The planned launch (since
evidence/h200/2026-12-02_padded_parts/1_*: the realigned kernel on 8 warps, the window in parts up to 32768 lanes,
one program an SM over 16384 lanes, two from 8193, and _narrow_config's up to 8192 lanes since 2_*) beside the plan
before it (one power-of-two window over 16384, the row kernel at 2049-16384), eager and torch.compile, and the
realigned kernel over window cuts, warps and programs an SM. Each config is checked against fp32 before it is timed.
In 1_* reading x in flat runs (FLAT_X: consecutive threads on consecutive elements, regrouped in vectors through
shared memory) was 1.3-4x slower at every shape and config, and was taken out; so was FUNNEL in 3_* (x read in
aligned 16-byte vectors, each window vector cut from the two it straddles and shifted into place by a barrel shifter
of selects the same for every thread: 36 16-byte loads a row where the element reads take 146, 174 registers against
232 at 1029 x 16655 on 8 warps), 20-45% slower on every planned config (1029 x 16655 padded by 3: 44.6 us against
33.9; 4096 x 5001: 33.2 against 30.0), ahead only on the one-window 32768-lane builds on 16 warps that spill (3-5%),
none of them planned. So was X_GRID in 7_* (the window on x's vectors: x read in whole 16-byte vectors, y written
ALIGN_X elements at a time; 255 registers against 232 at 1029 x 16655): more than 1% slower at 83 of 88 configs (1029
x 16655 on the planned launch 39.6 us against 34.6; 4096 x 5001 38.3 against 30.1), 0.4-6% ahead at 4 unplanned ones.
Neither access width is what holds these rows back. Every config also runs with PF_L1 (the next row's lines
prefetched into L1 instead of its values held in registers, then read element by element at the top of its iteration:
127 registers against 228 at 1029 x 16655 on 8 warps, so two programs fit an SM; default builds SASS-identical). In
8_* it won where it let more programs share an SM: 1029 x 16655 26.3 us on 2 programs an SM against 34.1, 1024 x
20000 31.3 against 37.2, 620 x 30001 (one 32768 window, 16 warps) 34.3 against 38.2, 4096 x 3001 and 8192 x 2501 on
one 4096 window (4 warps, 8 an SM) 18.4 and 30.7 against 21.2 and 36.8; it lost at 700 x 24001 (24576 lanes), 4096 x
5001, 3000 x 7001 and 1500 x 12001. Planned there (softmax._PF_L1_*).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct

from kernelproof_core.kernels import softmax
from kernelproof_core.tasks import get_task

# (rows, width, row padding): the hidden draw above, then padded widths across the realigned kernel's range
SHAPES = ((1029, 16655, 3), (1024, 16655, 2), (1500, 12001, 6), (2048, 9001, 5), (700, 24001, 1), (620, 30001, 7),
          (1024, 20000, 3), (4096, 3001, 3), (4096, 5001, 1), (3000, 7001, 2), (8192, 2501, 5), (2048, 8001, 6))


def _parts_options(n: int) -> list[tuple[int, int, int]]:
    """One power-of-two window and, where softmax._parts' rounding cuts the row's span in parts, those parts."""
    one = (softmax._window(n, 2), 0, 0)
    cut = softmax._parts(n, 2, max_span=softmax._MAX_FUSED_N)
    return [one] if cut == one else [one, cut]


def padded_inputs(m: int, n: int, pad: int, dtype: torch.dtype, device: torch.device
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """x (rows padded by `pad`, logits of scale 4), an output, the fp32 reference and the bytes moved."""
    x = (torch.randn(m, n + pad, dtype=dtype, device=device) * 4)[:, :n]
    moved = 2 * m * n * x.element_size()
    return x, torch.empty((m, n), dtype=dtype, device=device), torch.softmax(x.float(), -1), moved


def realigned_trials(x: torch.Tensor, y: torch.Tensor, ref: torch.Tensor, moved: int, sms: int,
                     parts: tuple[int, int, int], configs: Iterable[tuple[int, int]]) -> Iterator[Trial]:
    """The realigned kernel on the window `parts` over (programs an SM, warps) configs, each with and without
    PF_L1, checked against fp32 first."""
    m, n = x.shape
    stride = x.stride(0)
    for (per_sm, warps), pf in itertools.product(configs, (False, True)):
        launch, meta = softmax._realigned_plan(m, n, stride, x.element_size(), sms, per_sm, warps, False, parts)
        label = "+".join(str(p) for p in parts if p) + f" warps={warps} per_sm={per_sm}" + (" pf_l1" * pf)
        yield from _checked(partial(launch, x, y, m, n, stride, **{**meta, "PF_L1": pf}), y, ref,
                            "softmax.realigned", (m, n), label, moved)


def softmax_padded_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    sms = softmax._num_sms(device)
    for m, n, pad in SHAPES:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        yield ("softmax.eager", (m, n), "eager", partial(torch.softmax, x, -1), moved, False)
        yield ("softmax.inductor", (m, n), "torch.compile", partial(torch.compile(get_task("softmax").baseline()), x),
               moved, False)
        before = softmax._plan(m, n, n + pad, x.element_size(), device, dtype, padded_parts=False)
        yield from _checked(partial(softmax._run, before, x, y, m, n, n + pad), y, ref, "softmax.before", (m, n),
                            f"before: {_kind(before)}", moved)
        narrow = softmax._lanes(n, 2) <= softmax._PIPELINED_MIN_N
        configs = ((2, 4), (2, 8), (8, 4), (8, 8)) if narrow else ((1, 8), (1, 16), (2, 8), (2, 16))
        for parts in _parts_options(n):
            yield from realigned_trials(x, y, ref, moved, sms, parts, configs)


def _kind(plan: object) -> str:
    """Which kernel a softmax plan launches, for the sweep's labels."""
    if not isinstance(plan, tuple) or hasattr(plan, "_fields"):  # _Split, _Staged: NamedTuples
        return type(plan).__name__.strip("_")
    meta = plan[1]
    if "WINDOW" in meta:
        return f"realigned {meta['WINDOW']}+{meta['PART1']} w{meta['num_warps']}"
    return "resident" if "NCHUNK" in meta else "row kernel"


def _checked(run: Callable[[], object], y: torch.Tensor, ref: torch.Tensor, kind: str, shape: tuple[int, int],
             label: str, moved: int) -> Iterator[Trial]:
    """The trial, if one run of it matches fp32 (else it is reported and skipped)."""
    y.fill_(float("nan"))
    run()
    if _correct(y, ref, f"{kind} {shape[0]}x{shape[1]} {label}"):
        yield (kind, shape, label, run, moved, False)


# rows past 32768 padded off the vector grid: the campaigns' hidden `odd` draws (2026-12-02_padded_parts/4_*,
# pf_l1_plan/2_*, 4_*) first; 692 x 46027 is pf_l1_plan/4_*'s contiguous `hidden_offset` (the resident kernel)
WIDE_SHAPES = ((1965, 43657, 9), (806, 42132, 33), (1823, 42359, 10), (1024, 40001, 3), (1024, 36001, 5),
               (800, 60001, 5), (1024, 50000, 2), (692, 46027, 0))


def softmax_padded_wide_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_padded_wide`: 16-bit rows of 32769-65536 padded off the vector grid take the realigned split
    (chunks cut from the output's vector window, x read ALIGN_X elements at a time; its chunk and warps were swept on
    contiguous rows only): over chunk bytes and warps, beside the planned launch, eager and torch.compile. On the H200
    (bf16, CUPTI, evidence/h200/2026-12-02_padded_parts/6_*) the planned chunk (8192 bytes, 4 warps) was the best
    config swept or within 0.1% at 1965 x 43657, 1024 x 40001 and 800 x 60001 (58.4-60.8% of copy; torch.compile
    25-29%); 1024 x 50000 padded by 2 is planned on the resident kernel (4-byte copies): 70.2%, the split's best 61.8%.
    (Resident plans' labels in 6_* and pf_l1_plan/5_* read "row kernel": a labelling slip, fixed after 5_*; the
    launches were the plan's.)
    _widest_trials add the realigned kernel holding whole rows on one 32-warp program an SM with PF_L1 (64 registers,
    no stack up to 49152 lanes on an sm_90 build). In pf_l1_plan/5_* (with the campaigns' draws, planned there for
    that one run) it was 3-18% behind the split at the five padded odd shapes (37-46% behind the resident kernel at
    1024 x 50000 and 692 x 46027): 1965 x 43657 139.6 us on 32768+16384 lanes against
    133.6 (152.1 on 32768+8192+4096: a 4096 part is half a 32-warp CTA's vectors), 806 x 42132 padded by 33 67.8
    against 57.3, 1823 x 42359 114.7 against 111.8, 1024 x 40001 71.6 against 64.2, 1024 x 36001 64.6 against 58.1.
    Not planned."""
    for m, n, pad in WIDE_SHAPES:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        yield ("softmax.planned", (m, n), f"planned pad={pad} ({_kind(softmax._plan(m, n, n + pad, 2, device))})",
               partial(softmax.candidate, x), moved, True)
        yield ("softmax.eager", (m, n), "eager", partial(torch.softmax, x, -1), moved, False)
        yield ("softmax.inductor", (m, n), "torch.compile", partial(torch.compile(get_task("softmax").baseline()), x),
               moved, False)
        before = softmax._plan(m, n, n + pad, 2, device, dtype, padded_parts=False)
        yield from _checked(partial(softmax._run, before, x, y, m, n, n + pad), y, ref, "softmax.before", (m, n),
                            f"before: {_kind(before)}", moved)
        yield from _widest_trials(x, y, ref, m, n, pad, moved, softmax._num_sms(device))
        for chunk_bytes, warps in itertools.product((4096, 8192, 16384, 32768), (2, 4, 8, 16)):
            if not 4 <= chunk_bytes // x.element_size() // (warps * 32) <= 64:
                continue
            plan = softmax._split_realigned_plan(m, n, n + pad, x.element_size(), chunk_bytes, warps)
            if plan.n_parts > softmax._num_sms(device):
                continue
            yield from _checked(partial(softmax._run, plan, x, y, m, n, n + pad), y, ref, "softmax.split_realigned",
                                (m, n), f"chunk={chunk_bytes // x.element_size()} warps={warps}", moved)


# contiguous rows on the realigned kernel: the campaign's vocab_32000, long_32768 and random0 (1723 x 25249)
PREFETCH_SHAPES = ((2048, 32000), (2048, 32768), (1723, 25249), (2048, 24576))


def softmax_prefetch_l1_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_prefetch_l1`: PF_L1 (the next row's lines prefetched into L1 instead of its values held in
    registers; planned on padded rows since evidence/h200/2026-12-02_padded_parts/8_*) on contiguous 16-bit rows of
    the realigned path, whose 2048-row cases sit at 88-89% of copy. There it frees no occupancy (an sm_90 build holds
    125-128 registers a thread on 16 warps either way, 62-64 on 32), so this asks whether the L1 prefetch alone, or a
    32-warp program, moves them: planned, and each config with and without PF_L1. H200, bf16, CUPTI
    (evidence/h200/2026-12-02_pf_l1_plan/1_*): no: the planned launch best or within 0.3% at 2048 x 32000 (88.6% of
    copy), 2048 x 32768 (71.5 us against 71.3 on 2 an SM, 16 warps) and 1723 x 25249 (77.1%), 1.5% behind one
    program an SM on 16 warps at 2048 x 24576 (60.3 against 61.2 us); nothing planned from it."""
    sms = softmax._num_sms(device)
    for m, n in PREFETCH_SHAPES:
        x = torch.randn(m, n, dtype=dtype, device=device) * 4
        y = torch.empty_like(x)
        ref = torch.softmax(x.float(), -1)
        moved = 2 * x.numel() * x.element_size()
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for (per_sm, warps), pf in itertools.product(((2, 16), (1, 16), (1, 32)), (False, True)):
            launch, meta = softmax._realigned_plan(m, n, n, x.element_size(), sms, per_sm, warps, False)
            label = f"{meta['WINDOW']} warps={warps} per_sm={per_sm}" + (" pf_l1" * pf)
            yield from _checked(partial(launch, x, y, m, n, n, **{**meta, "PF_L1": pf}), y, ref, "softmax.realigned",
                                (m, n), label, moved)


def _widest_trials(x: torch.Tensor, y: torch.Tensor, ref: torch.Tensor, m: int, n: int, pad: int, moved: int,
                   sms: int) -> Iterator[Trial]:
    """The realigned kernel holding a whole row past 32768 on one 32-warp program an SM, with PF_L1 (the plan's
    _PF_L1_WIDEST) and without (it spills), the window in softmax._parts' cut and in two parts."""
    span = n if n % 8 == 0 else n + 7
    cuts = {softmax._parts(n, 2, max_span=1 << 16)}
    if span <= 49152:
        cuts.add((32768, 16384, 0))
    for parts in sorted(cuts):
        if sum(parts) > 53248:
            continue
        for pf in (True, False):
            launch, meta = softmax._realigned_plan(m, n, n + pad, 2, sms, 1, 32, False, parts)
            label = "+".join(str(p) for p in parts if p) + " warps=32 per_sm=1" + (" pf_l1" * pf)
            yield from _checked(partial(launch, x, y, m, n, n + pad, **{**meta, "PF_L1": pf}), y, ref,
                                "softmax.realigned", (m, n), label, moved)


# Rows past 32768 padded off the vector grid: hidden `odd` draws at 64 MB or more (benchmarks/hidden_draws.py) off
# cp.async's 4-byte grid (align 1: the split today, 57-61% of copy on the H200), then rows on it (align 2: the resident
# kernel's 4-byte copies, 70.2% at 1024 x 50000 in 2026-12-02_padded_parts/6_*) and one padded by 64, whose rows start
# where the contiguous rows do in their 128-byte lines (PADDED's windows then match REALIGN's: the same bytes).
RESIDENT_PADDED_SHAPES = ((630, 40361, 9), (876, 41392, 3), (1607, 45315, 1), (1965, 43657, 9), (1024, 40001, 3),
                          (800, 60001, 5), (806, 42132, 33), (1024, 50000, 2), (1991, 33508, 64))


def softmax_resident_padded_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_padded`: PADDED (softmax._RESIDENT_PADDED, off) takes padded rows past 32768 to the
    resident kernel through windows laid by x's own stride (16-byte copies), y in whole vectors on its own grid:
    beside the planned launch (the split, or the resident kernel's 4-byte copies) and the same rows made contiguous
    first (the planned launch on x.contiguous(), the copy not timed: what PADDED would reach if its realignment cost
    nothing). Each config checked against fp32 before it is timed. On an H100 (bf16, CUPTI,
    evidence/h100/2026-12-07_twenty_seventh/2_*) PADDED's first form, y by 2-byte stores, ran at 22-30% of copy
    against the split's 66-72% and the contiguous rows' 84-93%; with y in whole vectors (twenty-eighth session,
    evidence/h100/2026-12-08_twenty_eighth/2_*) 66-73%, level with the split (within 1.6 points either way), and at
    pad 64 (no shift) 74.8 against the contiguous rows' 93.3: its realignment's instructions, or lane 31's loads'
    latency, cost the rest. Each PADDED config runs with lane 31's loads 1-3 chunks ahead, with TAILS and with LDS."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n, pad in RESIDENT_PADDED_SHAPES:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        planned = softmax._plan(m, n, n + pad, 2, device, dtype)
        yield ("softmax.planned", (m, n), f"planned pad={pad} ({_kind(planned)})", partial(softmax.candidate, x),
               moved, True)
        # lane 31's next vectors loaded 1-3 chunks ahead, or copied into shared memory with each chunk (TAILS):
        # does their L2 latency show?
        # LDS: each warp's vectors followed by its tail in the slots, the word shift read from a shifted address
        for ahead, lane31 in ((1, ""), (2, ""), (3, ""), (1, "tails"), (1, "lds")):
            plan = softmax._resident_plan(m, n, 1, 2, sms, smem, realign=True, padded=True, padded_ahead=ahead,
                                          padded_tails=lane31 == "tails", padded_lds=lane31 == "lds")
            assert plan is not None, (m, n, pad)
            meta = plan[1]
            label = (f"PADDED pad={pad} warps={meta['num_warps']} NRES={meta['NRES']}/{meta['NCHUNK']} "
                     + (lane31 or f"ahead={ahead}"))
            yield from _checked(partial(softmax._run, plan, x, y, m, n, n + pad), y, ref, "softmax.resident_padded",
                                (m, n), label, moved)
        contiguous = x.contiguous()
        yield ("softmax.planned", (m, n), "planned on x made contiguous", partial(softmax.candidate, contiguous),
               moved, False)
