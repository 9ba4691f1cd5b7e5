"""kernel_sweep.py family `softmax_resident`: the built-in softmax's resident path (rows held in shared memory) over
warps and programs per SM, each config checked against an fp32 reference before it is timed, beside the built-in's
planned launch on the same input (the resident path's default config, where it applies)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
from sweep_common import Trial

from kernelproof_core.kernels import softmax

SHAPES = ((2048, 32000), (4096, 32768), (1991, 33508), (1024, 40000), (1024, 65536), (683, 98304), (1024, 131072))


def _correct(y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """Every element within 1% of the fp32 softmax (a 16-bit rounding is under 0.4%; NaN: never written)."""
    bad = ~((y.float() - ref).abs() <= 1e-2 * ref.abs() + 1e-7)
    if bad.any():
        print(f"{label}: WRONG at {int(bad.sum())} elements", flush=True)
        return False
    return True


def _correct_twice(run: Callable[[], object], y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """run (writing y) right on two calls in a row (state a launch leaves behind, such as PARTS' words, must not
    make the second wrong); each call's output checked as _correct does."""
    ok = True
    for _ in range(2):
        y.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        ok = ok and _correct(y, ref, label)
    return ok


def inputs(m: int, n: int, dtype: torch.dtype, device: torch.device,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """x (logits spread enough that every row's max matters), an output buffer, the fp32 softmax and the bytes a pass
    moves (x read, y written) for an m x n trial of the resident families."""
    x = torch.randn(m, n, dtype=dtype, device=device) * 4
    return x, torch.empty_like(x), torch.softmax(x.float(), -1), 2 * x.numel() * x.element_size()


def softmax_resident_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Wide rows (32000-131072, aligned and 8-byte aligned) on the resident kernel against the planned launch."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        yield from _configs(x, y, ref, moved, sms, smem, False)


REALIGNED_SHAPES = ((1991, 33508), (1024, 40001), (700, 49999), (512, 50257), (1024, 65535), (683, 98301),
                    (1024, 131071))


def softmax_resident_realigned_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_realigned`: contiguous rows off the 16-byte grid (widths not a multiple of 8) on the
    resident kernel through their vector windows (REALIGN: 16-byte copies and stores), against the path the plan
    took before (4- or 8-byte copies where the width is even, the split or staged path where it is odd) and the
    planned launch."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in REALIGNED_SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        before = softmax._plan(m, n, n, x.element_size(), device, dtype, resident_realign=False)
        launch = partial(softmax._run, before, x, y, m, n, n)
        y.fill_(float("nan"))
        launch()
        if _correct(y, ref, f"softmax.before {m}x{n}"):
            yield ("softmax.before", (m, n), "resident" if type(before) is tuple else type(before).__name__.strip("_"),
                   launch, moved, False)
        yield from _configs(x, y, ref, moved, sms, smem, True)


def _configs(x: torch.Tensor, y: torch.Tensor, ref: torch.Tensor, moved: int, sms: int, smem: int,
             realign: bool) -> Iterator[Trial]:
    """The resident kernel over warps and programs per SM on x, each config checked against ref before it is
    timed."""
    m, n = x.shape
    es = x.element_size()
    name = "softmax.resident_realigned" if realign else "softmax.resident"
    # one 16-byte vector per thread per chunk (32 bytes lost 5-25 points: evidence/h200/2026-12-01_resident_rows/)
    k = 16 // es
    for warps, per_sm in itertools.product((8, 16, 32), (1, 2)):
        # 8 warps alone on an SM trailed every other config by 5-25 points (2026-12-01_fused_rows/1_*)
        if 32 * warps * k > n or (per_sm == 2 and warps == 32) or (per_sm, warps) == (1, 8):
            continue
        label = f"warps={warps} per_sm={per_sm}"
        try:
            plan = softmax._resident_plan(m, n, softmax._align(es, n, n), es, sms, smem, warps, k, per_sm,
                                          realign)
        except ValueError as exc:  # a chunk larger than the budget
            print(f"{name} {m}x{n} {label}: {exc}", flush=True)
            continue
        if plan is None:
            print(f"{name} {m}x{n}: not applicable", flush=True)
            break
        launch = partial(plan[0], x, y, m, n, n, **plan[1])
        y.fill_(float("nan"))
        launch()
        if _correct(y, ref, f"{name} {m}x{n} {label}"):
            yield (name, (m, n), label, launch, moved, False)


def _resident_variants(family: str, m: int, n: int, device: torch.device, dtype: torch.dtype,
                       variants: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]]) -> Iterator[Trial]:
    """The planned launch of an m x n softmax, then its resident plan with each variant's overrides (label, meta
    changes), each checked against fp32 before it is timed."""
    x, y, ref, moved = inputs(m, n, dtype, device)
    yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
    plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
    if type(plan) is not tuple or "NRES" not in plan[1]:
        print(f"softmax_{family} {m}x{n}: not resident", flush=True)
        return
    launch, meta = plan
    for label, overrides in variants(meta):
        run = partial(launch, x, y, m, n, n, **{**meta, **overrides})
        y.fill_(float("nan"))
        run()
        print(f"softmax.{family} {m}x{n} {label}: relative L2 {float((y.float() - ref).norm() / ref.norm()):.2e}",
              flush=True)
        if _correct(y, ref, f"softmax.{family} {m}x{n} {label}"):
            yield (f"softmax.{family}", (m, n), label, run, moved, False)



KEEP_SHAPES = ((1024, 40000), (1024, 65536), (683, 98304), (1024, 131072), (512, 128256), (1991, 33508),
               (1024, 65535), (1723, 64803))


def softmax_resident_keep_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_keep`: the planned resident launch with KEEP (the stats pass's exponentials kept over
    x in their slots as fp16, so the output pass takes one exponential a thread a chunk and a multiply an element, not
    an exponential an element) and without; one-program-per-SM plans also without their stagger (KEEP shortens the
    output pass, which may move the stagger's best). Rows over the budget (chunks streamed) also on 16 warps, and
    with HOLD (the streamed chunks loaded into registers as the row starts and kept for the output pass, not read
    again). Relative L2 errors are printed: KEEP rounds twice."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in KEEP_SHAPES:
        def variants(meta: dict[str, Any], m: int = m, n: int = n) -> list[tuple[str, dict[str, Any]]]:
            if meta["NRES"] == meta["NCHUNK"]:
                return [(f"keep={int(keep)} stagger={st}", {"KEEP": keep, "STAGGER": st})
                        for keep in (False, True) for st in sorted({meta["STAGGER"], 0})]
            out = []
            for warps in sorted({meta["num_warps"], 16}):
                for keep, hold in ((False, False), (True, False), (False, True), (True, True)):
                    plan = softmax._resident_plan(m, n, softmax._align(2, n, n) if not meta["REALIGN"] else 1, 2, sms,
                                                  smem, warps=warps, per_sm=1, realign=meta["REALIGN"], keep=keep,
                                                  hold=hold)
                    assert plan is not None
                    out.append((f"warps={warps} NRES={plan[1]['NRES']}/{plan[1]['NCHUNK']} keep={int(keep)} "
                                f"hold={int(hold)}", plan[1]))
            return out

        yield from _resident_variants("resident_keep", m, n, device, dtype, variants)
    # More rows in flight an SM: random0's 1723 x 25249 (on the register path, 84-85% in the campaigns) on the
    # resident kernel through windows, and random2's 1991 x 33508 (two 8-warp programs an SM, 76-77%) three to an SM
    # (216 KB of the SM's 228 KB, so its 17 chunks stay resident), with and without KEEP, against the planned launch.
    for m, n, budgets in ((1723, 25249, {2: 0, 3: 0}), (1991, 33508, {3: 216 * 1024})):
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for (per_sm, budget), keep in itertools.product(budgets.items(), (False, True)):
            plan = softmax._resident_plan(m, n, 1, 2, sms, smem, warps=8, per_sm=per_sm, realign=n % 8 != 0,
                                          budget_bytes=budget, keep=keep)
            assert plan is not None
            # three 256-thread programs fit an SM's 65536 registers at 80 a thread (KEEP takes 99 unbounded; sm_90
            # builds at 80 do not spill)
            regs = {"maxnreg": 80} if per_sm == 3 else {}
            run = partial(plan[0], x, y, m, n, n, **plan[1], **regs)
            y.fill_(float("nan"))
            run()
            label = (f"resident per_sm={per_sm} warps=8 NRES={plan[1]['NRES']}/{plan[1]['NCHUNK']} "
                     f"keep={int(keep)}{' maxnreg=80' if regs else ''}")
            if _correct(y, ref, f"softmax.resident_keep {m}x{n} {label}"):
                yield ("softmax.resident_keep", (m, n), label, run, moved, False)


# Rows of 40-64K elements whose two copies do not fit an SM's shared memory but fit it and the register file: the
# copy_rows diagnostic (NOTES, "What a row-at-a-time program can reach") stops at 84% where one program an SM reads a
# 65536-wide row before writing it, and at 93.5% at 32768 where two share an SM.
# The last two: rows of 144-160 KB, where a pair holds 32-48 KB a program in registers (one program an SM today);
# sm_90 builds at 8 warps (128 registers) do not spill up to 81920 wide (86016: 176 bytes of stack, 98304: 688),
# at 16 warps (64) they do from 73728 (8 bytes).
PAIR_SHAPES = ((1024, 65536), (1024, 65535), (2048, 65536), (1024, 49152), (800, 73728), (800, 81920),
               (1024, 53248))  # the last: planned as two whole rows an SM since PAIR (13 chunks), not yet timed


def softmax_resident_pair_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_pair`: two resident programs an SM on rows one SM's shared memory holds only once,
    each keeping 100-112 KB of its row in slots and the rest in registers (HOLD: loaded as the row starts, not read
    again) or re-read from L2 (HOLD off), with and without KEEP, against the planned launch (one program an SM).
    Registers are capped so that two programs fit an SM; each config prints its registers, spills and shared memory,
    and how many such programs fit an SM."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in PAIR_SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        first = (m, n) == PAIR_SHAPES[0]
        budgets = (208 * 1024, 224 * 1024) if first else (224 * 1024,)
        holds = (False, True) if first else (True,)
        for warps, budget, hold, keep in itertools.product((8, 16), budgets, holds, (False, True)):
            plan = softmax._resident_plan(m, n, softmax._align(x.element_size(), n, n), x.element_size(), sms, smem,
                                          warps=warps, per_sm=2, realign=n % 8 != 0, budget_bytes=budget,
                                          keep=keep and x.element_size() == 2, hold=hold)
            assert plan is not None
            meta = plan[1]
            label = (f"pair warps={warps} NRES={meta['NRES']}/{meta['NCHUNK']} hold={int(meta['HOLD'])} "
                     f"keep={int(meta['KEEP'])}")
            # capped so that two programs' registers fit the SM's 65536 (REALIGN takes up to 156 unbounded)
            run = partial(plan[0], x, y, m, n, n, **{**meta, "maxnreg": 65536 // (2 * 32 * warps)})
            y.fill_(float("nan"))
            compiled = run()
            regs, shared = getattr(compiled, "n_regs", 0), getattr(getattr(compiled, "metadata", None), "shared", 0)
            spills = getattr(compiled, "n_spills", 0)
            fit = min(65536 // max(1, regs * 32 * warps), smem // max(1, shared + 1024))
            print(f"softmax.resident_pair {m}x{n} {label}: regs={regs} spills={spills} shared={shared} "
                  f"programs an SM that fit={fit}", flush=True)
            if _correct(y, ref, f"softmax.resident_pair {m}x{n} {label}"):
                yield ("softmax.resident_pair", (m, n), label, run, moved, False)


# Rows too wide for two programs an SM (one 32-warp program an SM streaming 2 of 16 chunks, 71-75% of copy on the
# H200) and rows of 96-98 KB halves, against the plan.
PARTS_SHAPES = ((1024, 131072), (512, 128256), (683, 98304), (800, 104000))


def softmax_resident_parts_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_parts`: the resident kernel with each row cut into 2 or 4 equal parts on sibling
    programs that meet once a row through 64-bit words (PARTS), so that a part is PAIR's size (two programs an SM,
    the chunks past the slots in registers) or smaller; the plan's default for each part, and 8-warp pairs at 128
    registers. Each config is checked against fp32 twice (its words start zero on every call) and prints its
    registers."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    es = 2
    for m, n in PARTS_SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        configs: list[tuple[str, int, dict[str, Any]]] = [("default", 2, {}), ("default", 4, {}),
                                                          ("pair8", 2, {"warps": 8, "per_sm": 2,
                                                                        "budget_bytes": 224 * 1024, "hold": True})]
        for name, parts, kw in configs:
            if n % (parts * 8):
                continue
            plan = softmax._resident_plan(m, n, softmax._align(es, n, n), es, sms, smem, parts=parts, **kw)
            assert plan is not None
            if name == "pair8" and not plan[1]["HOLD"]:  # a part the 8-warp slots hold whole: the default's launch
                continue
            meta = {**plan[1], **({"maxnreg": 128} if name == "pair8" else {})}
            label = (f"parts={parts} {name} warps={meta['num_warps']} NRES={meta['NRES']}/{meta['NCHUNK']} "
                     f"hold={int(meta['HOLD'])}")
            run = partial(softmax._run, (plan[0], meta), x, y, m, n, n)
            if _correct_twice(run, y, ref, f"softmax.resident_parts {m}x{n} {label}"):
                yield ("softmax.resident_parts", (m, n), label, run, moved, False)


_THREE = {"per_sm": 3, "warps": 8, "budget_bytes": 224 * 1024}  # three 8-warp programs an SM, 74 KB each
# (rows, width, per_sm / warps / hold overrides): the campaign's resident cases and the register kernel's 32768 and
# 25249 (random0), where the resident kernel's two exponentials an element were too many (benchmarks/NOTES.md,
# "Where the resident kernel's time goes").
MAXFIRST_SHAPES: tuple[tuple[int, int, tuple[dict[str, Any], ...]], ...] = (
    (1024, 65536, ({},)), (2048, 65536, ({},)), (1024, 49152, ({},)), (1024, 53248, ({},)),
    (1024, 131072, ({}, {"hold": True}, {"warps": 16, "per_sm": 1, "hold": True})),
    (512, 128256, ({}, {"hold": True})),
    (1991, 33508, ({}, _THREE)), (1723, 25249, ({"per_sm": 2}, _THREE)), (2048, 32768, ({"per_sm": 2}, _THREE)))


def softmax_resident_maxfirst_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_maxfirst`: the resident kernel taking the row's max first and one exponential an
    element (MAXFIRST: p = 2^((x - max) log2 e) kept as fp16 over x, the output pass a multiply) against the planned
    launch and the same resident launch without it."""
    yield from _option_trials("maxfirst", softmax._RESIDENT_MAXFIRST, MAXFIRST_SHAPES, device, dtype)


# Streamed rows: aligned (HOLD planned since the H200 sweep with FREE), through windows and 16 warps one an SM.
HOLD_SHAPES: tuple[tuple[int, int, tuple[dict[str, Any], ...]], ...] = (
    (1024, 131072, ({}, {"warps": 16, "per_sm": 1})), (512, 128256, ({},)), (768, 120000, ({},)),
    (1024, 131071, ({},)), (512, 128257, ({},)))


def softmax_resident_hold_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_hold`: rows over the shared-memory budget with the chunks past the slots held in
    registers (HOLD: planned for aligned 16-bit rows) against streaming them again, aligned and through windows."""
    yield from _option_trials("hold", softmax._RESIDENT_HOLD, HOLD_SHAPES, device, dtype)


def _option_trials(option: str, planned: bool, shapes: tuple[tuple[int, int, tuple[dict[str, Any], ...]], ...],
                   device: torch.device, dtype: torch.dtype, values: tuple[bool, ...] = (False, True),
                   family: str = "") -> Iterator[Trial]:
    """The planned launch, then the resident kernel with and without (`values`) one _resident_plan option (`option`,
    planned as `planned`) at each shape's overrides (the config the plan itself launches is not timed twice). Each
    config is checked against fp32 twice and prints its registers and spills. An override of programs an SM caps
    registers so that they fit (FREE builds take more: 80 -> 117 at 33508 on 8 warps)."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    es = 2
    family = family or f"softmax.resident_{option}"
    for m, n, overrides in shapes:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        default = softmax._resident_plan(m, n, softmax._align(es, n, n), es, sms, smem, realign=n % 8 != 0)
        # the option as the plan sets it for this shape (HOLD: not through windows)
        here = planned if default is None else bool(default[1].get(option.upper(), False))
        for kw, on in itertools.product(overrides, values):
            if not kw and on == here and n > softmax._MAX_FUSED_N:  # the planned launch itself
                continue
            plan = softmax._resident_plan(m, n, softmax._align(es, n, n), es, sms, smem, realign=n % 8 != 0,
                                          **{option: on}, **kw)
            yield from _plan_trial(family, option if on else "resident", plan, kw, "HOLD", x, y, ref, moved, n)


def _plan_trial(family: str, name: str, plan: softmax.Launch | None, kw: dict[str, Any], tag: str, x: torch.Tensor,
                y: torch.Tensor, ref: torch.Tensor, moved: int, stride: int) -> Iterator[Trial]:
    """One resident plan as a trial: registers capped where kw overrides the programs an SM (so that they fit; FREE
    builds take more: 80 -> 117 at 33508 on 8 warps), its registers and spills printed, checked against fp32 twice.
    The label names the config and the meta flag `tag`."""
    assert plan is not None
    m, n = y.shape
    meta = plan[1]
    if "per_sm" in kw and "maxnreg" not in meta:
        meta["maxnreg"] = 65536 // (kw["per_sm"] * 32 * meta["num_warps"])
    label = (f"{name} per_sm={kw.get('per_sm', 'plan')} warps={meta['num_warps']} "
             f"NRES={meta['NRES']}/{meta['NCHUNK']} {tag.lower()}={int(meta.get(tag, False))}")
    run = partial(softmax._run, plan, x, y, m, n, stride)
    compiled = plan[0](x, y, m, n, stride, **meta)
    print(f"{family} {m}x{n} {label}: regs={getattr(compiled, 'n_regs', 0)} "
          f"spills={getattr(compiled, 'n_spills', 0)}", flush=True)
    if _correct_twice(run, y, ref, f"{family} {m}x{n} {label}"):
        yield (family, (m, n), label, run, moved, False)


# (m, n, overrides): the campaign's wide rows (aligned, and REALIGN at 33508 / 25249 / 49196), PAIR and streamed plans.
FREE_SHAPES: tuple[tuple[int, int, tuple[dict[str, Any], ...]], ...] = (
    (1024, 65536, ({},)), (2048, 65536, ({},)), (1024, 131072, ({},)), (512, 128256, ({},)),
    (1024, 53248, ({},)), (400, 49196, ({},)), (1991, 33508, ({}, _THREE)), (1723, 25249, ({"per_sm": 2}, _THREE)))


def softmax_resident_free_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_free`: the resident kernel with FREE (its copies as inline PTX and its waits without
    CTA barriers: no barrier inside a row's passes; planned since the twelfth session) against the planned launch
    and the same resident launch without it."""
    yield from _option_trials("free", softmax._RESIDENT_FREE, FREE_SHAPES, device, dtype)


_FOUR = {"per_sm": 4, "warps": 8, "budget_bytes": 224 * 1024}  # four 8-warp programs an SM, 56 KB each
# (m, n, overrides): rows of the hidden offset / odd / flat_wide draws over 64 MB (33-50 K wide, a few hundred to a
# thousand rows) whose last round of resident programs is part full: 400 x 49196 (the H100 campaign's hidden_offset,
# 70-71%: 400 rows on 264 programs, a second round 52% full), then aligned rows at 1.3, 2.3, 3.8 and 1.9 (the
# control) rounds of two programs an SM.
ROUNDS_SHAPES: tuple[tuple[int, int, tuple[dict[str, Any], ...]], ...] = tuple(
    (m, n, ({"per_sm": 1}, _THREE, _FOUR)) for m, n in
    ((400, 49196), (350, 48000), (600, 40000), (1000, 36000), (512, 40000)))


def softmax_resident_rounds_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_rounds`: the planned launch (two programs an SM where two rows fit) against one,
    three and four programs an SM (the rest of a row streamed where its slots do not hold it) on rows whose last
    round is part full. Hypothesis: an SM's time is its most loaded slot's rows, so the programs an SM that leave the
    fewest rows in a part-full last round win, streamed chunks and all. Refuted on the H100: the plan's two an SM won
    at four of five shapes, three an SM only at 1000 x 36000 (evidence/h100/2026-12-06_two_phase_overlap/6_*)."""
    yield from _option_trials("free", softmax._RESIDENT_FREE, ROUNDS_SHAPES, device, dtype,
                              values=(softmax._RESIDENT_FREE,), family="softmax.resident_rounds")


# 400 x 49196 (REALIGN) ran at 73.9% where 512 x 50257 (the same build) ran at 84.6% and 400 x 49152 (aligned) at
# 84.7% (H100, evidence/h100/2026-12-06_two_phase_overlap/8_*, 9_*): the planned launch over row counts from one
# round of two programs an SM (264 on 132 SMs) to two, at both widths, maps where the loss comes and goes.
ROW_COUNTS = (264, 300, 350, 396, 400, 450, 512, 528)


def softmax_resident_rows_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_rows`: the planned launch of m x 49196 (windows) and m x 49152 (aligned) rows over
    ROW_COUNTS, checked against fp32 once each."""
    for n in (49196, 49152):
        for m in ROW_COUNTS:
            x, _y, ref, moved = inputs(m, n, dtype, device)
            if _correct(softmax.candidate(x), ref, f"softmax.planned {m}x{n}"):
                yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)


# (m, n, row stride): rows on the 8-byte grid but not the 16-byte one (width and stride multiples of 4, not 8):
# random2's 1991 x 33508 (77% of copy on the H200 through windows), the hidden_offset draw's 400 x 49196, 65532 and
# 131068 (PAIR's and the streamed widths less 4), and rows padded to a stride of 4 more (not windows: plain copies).
HALVES_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1991, 33508, 33508), (400, 49196, 49196), (512, 50260, 50260), (1024, 65532, 65532), (2048, 32772, 32772),
    (1024, 131068, 131068), (1024, 40000, 40004))


def softmax_resident_halves_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_halves`: rows on the 8-byte grid on the aligned resident kernel with FREE's copies
    as two 8-byte halves a vector (HALVES) against the planned launch (contiguous rows: REALIGN's windows), the same
    rows through windows at three programs an SM, and the aligned kernel with Gluon's 8-byte copies (no FREE)."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n, stride in HALVES_SHAPES:
        x = (torch.randn(m, stride, dtype=dtype, device=device) * 4)[:, :n]
        y, ref, moved = torch.empty((m, n), dtype=dtype, device=device), torch.softmax(x.float(), -1), 4 * m * n
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        configs: list[tuple[str, dict[str, Any]]] = [("halves", {"halves": True}), ("halves", {"halves": True,
                                                                                           **_THREE}),
                                                     ("aligned8", {"halves": False, "free": False})]
        if 50000 < n <= 65536:  # PAIR's launch (PAIR itself takes rows on the 16-byte grid only)
            configs.append(("halves", {"halves": True, "per_sm": 2, "warps": 16, "budget_bytes": 208 * 1024,
                                       "hold": True}))
        if stride == n:
            configs.append(("windows", {"realign": True, **_THREE}))
        for name, kw in configs:
            plan = softmax._resident_plan(m, n, 1 if kw.get("realign") else softmax._align(2, n, stride), 2, sms, smem,
                                          **kw)
            yield from _plan_trial("softmax.resident_halves", name, plan, kw, "FREE", x, y, ref, moved, stride)


# Widths around 49152 at one, 1.5 and 3.9 rows a program (two an SM): windows that fit 24 chunks of 2048 (49140,
# 49145: span under 49152) against windows that need a 25th, nearly empty one (49153, 49196: 51 of its 2048 positions
# at 49196) and the aligned 49152. The fifteenth session ruled the windows' masks and edges out as the 400-row loss
# (HALVES, EDGES_AHEAD, EDGE_LANES); this asks whether the extra chunk is it.
SPAN_SHAPES = tuple((m, n) for n in (49152, 49140, 49145, 49153, 49196) for m in (264, 400, 1024))


def softmax_resident_span_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_span`: the planned launch at SPAN_SHAPES, checked against fp32 once each."""
    for m, n in SPAN_SHAPES:
        x, _y, ref, moved = inputs(m, n, dtype, device)
        if _correct(softmax.candidate(x), ref, f"softmax.planned {m}x{n}"):
            yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)


# Rows through windows (widths off the 16-byte grid) at 264-1991 rows, and the aligned rows beside them.
LINE_SHAPES = ((264, 49196), (400, 49196), (1024, 49196), (1991, 33508), (1024, 65535), (512, 50257), (1024, 40001),
               (1024, 131071), (512, 128257))
# Aligned rows at strides that start them on a 128-byte line (the width), mid-line (8, 16, 32 or 56 elements more:
# 16-112 bytes) and on the next line (64 more): the windows' question without windows.
STRIDE_SHAPES = ((264, 49152), (400, 49152), (1024, 49152), (1024, 65536), (2048, 32768))
STRIDE_PADS = (0, 8, 16, 32, 56, 64)


def _planned_beside(family: str, tag: str, shapes: tuple[tuple[int, int], ...], device: torch.device,
                    dtype: torch.dtype, **option: Any) -> Iterator[Trial]:
    """At each contiguous shape, the planned launch, then the resident plan with one _resident_plan option (through
    windows where the width is off the 16-byte grid), labelled with its meta flag `tag`."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in shapes:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        plan = softmax._resident_plan(m, n, softmax._align(2, n, n), 2, sms, smem, realign=n % 8 != 0, **option)
        yield from _plan_trial(family, tag.lower(), plan, {}, tag, x, y, ref, moved, n)


def softmax_resident_line_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_line`: the planned launch (LINE: REALIGN's windows start on a 128-byte line, 64
    elements) against the same plan with windows on 16-byte vectors (line=0, as planned before LINE)."""
    yield from _planned_beside("softmax.resident_line", "LINE", LINE_SHAPES, device, dtype, line=0)


def softmax_resident_stride_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_stride`: the planned launch on aligned rows whose stride is the width plus each of
    STRIDE_PADS elements (the label gives where row 1 starts in its 128-byte line): does a row's start off a line
    cost the aligned kernel what the windows lose?"""
    for m, n in STRIDE_SHAPES:
        for pad in STRIDE_PADS:
            x = (torch.randn(m, n + pad, dtype=dtype, device=device) * 4)[:, :n]
            ref = torch.softmax(x.float(), -1)
            if _correct(softmax.candidate(x), ref, f"softmax.planned {m}x{n} stride {n + pad}"):
                yield ("softmax.planned", (m, n), f"stride={n + pad} row1_at_byte={(n + pad) * 2 % 128}",
                       partial(softmax.candidate, x), 4 * m * n, pad == 0)


# The campaign's wide rows (PAIR, HOLD, windows) and the aligned rows at 264-1024 rows.
ONE_SHIFT_SHAPES = ((1024, 65536), (1024, 131072), (512, 128256), (1991, 33508), (1723, 25249), (400, 49196),
                    (1024, 40000), (2048, 32768))


def softmax_resident_one_shift_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_one_shift`: the planned launch against the same plan with ONE_SHIFT (ordinary rows'
    exponents with the max and log2 of the sum in one shift: one multiply-add an element instead of CARRY's two)."""
    yield from _planned_beside("softmax.resident_one_shift", "ONE_SHIFT", ONE_SHIFT_SHAPES, device, dtype,
                               one_shift=True)


def softmax_resident_anchor_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_anchor`: the resident plan without ANCHOR and with it (no running max in the stats
    pass: each warp's sums against its first chunk's max; about a tenth fewer instructions a row) on ordinary logits,
    then on logits offset by 1e4 (fp16 6e3), whose steps of 64 (fp16 4) overflow past the anchors of most rows: what
    ANCHOR's redo (CARRY's stats pass again, over the row held in shared memory) costs such rows."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in ONE_SHIFT_SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        offset = (x.float() + (1e4 if dtype == torch.bfloat16 else 6e3)).to(dtype)
        for logits, data, want in (("normal", x, ref), ("offset", offset, torch.softmax(offset.float(), -1))):
            for anchor in (False, True):
                plan = softmax._resident_plan(m, n, softmax._align(2, n, n), 2, sms, smem, realign=n % 8 != 0,
                                              anchor=anchor)
                yield from _plan_trial("softmax.resident_anchor", logits, plan, {}, "ANCHOR", data, y, want, moved, n)
