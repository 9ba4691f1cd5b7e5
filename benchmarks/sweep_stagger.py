"""kernel_sweep.py family `softmax_stagger`: the built-in softmax's resident path with half its programs starting a
number of SM clocks late (STAGGER) or not at all, so programs doing equal work stop passing through their HBM-idle
stats passes in lockstep. Each config is checked against an fp32 reference before it is timed, beside the planned
launch (which staggers one-program-per-SM plans by softmax._RESIDENT_STAGGER)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct, _resident_variants, inputs

from kernelproof_core.kernels import softmax

# one program per SM (aligned and off the 16-byte grid), then two per SM and rows streamed past the budget
SHAPES = ((1024, 65536), (1024, 65535), (800, 60000), (683, 98304), (683, 98301), (1024, 40000), (1024, 131072))
STAGGERS = (0, 2500, 5000)  # SM clocks (H200: about 1.98 per ns at boost)


def softmax_stagger_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_stagger`: the planned resident launch with STAGGER at each of STAGGERS."""
    for m, n in SHAPES:
        yield from _resident_variants("stagger", m, n, device, dtype, lambda meta: [
            (f"stagger={st} (planned {meta['STAGGER']}, {meta['num_warps']} warps)", {"STAGGER": st})
            for st in STAGGERS])


BUDGET_SHAPES = ((1024, 131072), (512, 128256), (600, 110000), (800, 104000))
BUDGETS_KB = (200, 212, 224)  # a block may take 227 KB on the H200; the plan gives one program per SM 224


def softmax_resident_budget_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_budget`: rows over 200 KB of shared memory, one program per SM, given more of it
    (fewer chunks streamed; 16 warps holding the whole row where it then fits); the plan takes 224 KB."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in BUDGET_SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for kb in BUDGETS_KB:
            plan = softmax._resident_plan(m, n, softmax._align(2, n, n), x.element_size(), sms, smem, per_sm=1,
                                          budget_bytes=kb * 1024)
            if plan is None:
                continue
            launch, meta = plan
            run = partial(launch, x, y, m, n, n, **meta)
            y.fill_(float("nan"))
            run()
            label = f"budget={kb}KB warps={meta['num_warps']} NRES={meta['NRES']}/{meta['NCHUNK']} " \
                    f"stagger={meta['STAGGER']}"
            if _correct(y, ref, f"softmax.budget {m}x{n} {label}"):
                yield ("softmax.budget", (m, n), label, run, moved, False)


SAFE_SHAPES = ((1024, 40000), (1024, 65536), (800, 60000), (683, 98304), (1024, 131072), (512, 128256),
              (1991, 33508), (1024, 65535))


def softmax_resident_safe_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_safe`: the planned resident launch with SAFE (a row whose |max| reaches _FOLD_MAX is
    summed and written again with the max subtracted first, after the common output pass) against the
    fold-everything kernel, which is NaN for bfloat16 rows holding logits over 2.36e38, and against CARRY (the
    rounded max carried, one more add an element); then rows of logits offset by 1e8 (the task's hidden `offset`
    profile: every row takes SAFE's second look, none does with CARRY) on the planned launch, with CARRY, and
    eager. The second look as a called function (APART_SAFE, removed after evidence/h200/2026-12-02_pending_runs/1_*)
    ran ordinary rows 0.4-4.3% slower than inlined."""
    for m, n in SAFE_SHAPES:
        yield from _resident_variants("safe", m, n, device, dtype, lambda meta: [
            (f"safe={int(safe)} carry={int(carry)} warps={meta['num_warps']} NRES={meta['NRES']}/{meta['NCHUNK']}",
             {"SAFE": safe, "CARRY": carry}) for safe, carry in ((False, False), (True, False), (True, True))])
    for m, n in OFFSET_SHAPES:
        x, _y, _ref, moved = inputs(m, n, dtype, device)
        x = (x.float() * 2.5e5 + 1e8).to(dtype)  # spread 1e6, offset 1e8 (tasks/softmax.py OFFSETS, bf16)
        ref = torch.softmax(x.float(), -1)
        if _correct(softmax.candidate(x), ref, f"softmax.offset {m}x{n}"):
            yield ("softmax.offset_planned", (m, n), "planned, offset 1e8", partial(softmax.candidate, x), moved, True)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        if type(plan) is tuple and "NRES" in plan[1]:
            launch, meta = plan
            y = torch.empty_like(x)
            run = partial(launch, x, y, m, n, n, **{**meta, "CARRY": True})
            run()
            if _correct(y, ref, f"softmax.offset_carry {m}x{n}"):
                yield ("softmax.offset_carry", (m, n), "carry, offset 1e8", run, moved, False)
        yield ("softmax.offset_eager", (m, n), "eager, offset 1e8", partial(torch.softmax, x, -1), moved, False)


OFFSET_SHAPES = ((309, 43846), (1024, 65536), (512, 128256))
