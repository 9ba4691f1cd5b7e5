"""kernel_sweep.py families that time the built-ins' row kernels beside torch.compile and Liger (`*_parity`, run
with --cupti) and the looped wide-row design of experimental_looped.py against the shipped wide-row paths."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import experimental_kernels
import experimental_looped
import experimental_realigned
import torch
from sweep_common import Launcher, Trial, rms_norm_inputs, rms_norm_planned, rms_norm_ref

from kernelproof_core.kernels import rms_norm, softmax, swiglu
from kernelproof_core.tasks import get_task


def _others(task_name: str, args: tuple[Any, ...]) -> Iterator[tuple[str, Launcher]]:
    """torch.compile (compiled afresh for this shape, static) and Liger-Kernel (when importable) on the same inputs:
    the public kernels the built-ins are measured against (benchmarks/bandwidth.py)."""
    import bandwidth

    torch._dynamo.reset()
    compiled = torch.compile(get_task(task_name).baseline(), dynamic=False)
    yield "torch.compile", partial(compiled, *args)
    liger = bandwidth.liger_impl(task_name)
    if liger is not None:
        yield "liger", partial(liger, *args)


def rms_norm_parity_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The row kernel as shipped, without masks (EVEN), re-reading its tile instead of holding it (REREAD, as
    torch.compile's rms_norm does) and with streaming stores (STREAM), over rows per program and warps, beside
    torch.compile and Liger; run with --cupti to compare kernel time as bandwidth.py's kernel-only columns do."""
    variants = ((False, False, False), (False, True, False), (False, True, True), (True, True, False),
                (True, True, True))  # (EVEN, REREAD, STREAM)
    for m, n in ((256, 2048), (8192, 2880), (8192, 4096), (16384, 8192), (32768, 8192), (65536, 4096),
                 (65536, 1024), (32768, 6000)):
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        align = rms_norm._align(x.element_size(), n)
        block_n = 1 << (n - 1).bit_length()
        ref = rms_norm_ref(x, w)
        for block_m, warps, (even, reread, stream) in itertools.product((1, 2, 4, 8), (4, 8, 16), variants):
            per_thread = block_m * block_n // (warps * 32)
            if per_thread < 8 or per_thread > 32 or block_m * block_n > 8192 or \
                    (even and (block_n != n or m % block_m)):
                continue
            meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align, "EVEN": even, "REREAD": reread,
                    "STREAM": stream, "num_warps": warps}
            launch = partial(rms_norm._rms_norm_rows[(-(-m // block_m),)], x, w, y, m, n, n, 1e-6, **meta)
            label = f"block_m={block_m} warps={warps}" + (" even" if even else "") + (" reread" if reread else "") \
                + (" stream" if stream else "")
            if _checked(launch, y, ref, f"rms_norm.rows {m}x{n} {label}"):
                yield ("rms_norm.rows", (m, n), label, launch, moved, False)
        for name, other in _others("rms_norm", (x, w, 1e-6)):
            yield (f"rms_norm.{name}", (m, n), name, other, moved, False)


def rms_norm_realigned_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Unaligned 16-bit rows (widths not a multiple of 8) on the realigned kernel, its window in parts or one, over
    warps, x held or re-read, against the row kernel as the plan picked it before (scalar accesses), torch.compile
    and Liger."""
    for m, n in ((8192, 2880), (3124, 5999), (8192, 2879), (4096, 4097), (2000, 12345), (32768, 1027), (3000, 9001),
                 (8192, 2100)):  # 2880: aligned, but 2048 + 1024 lanes against the row kernel's 4096
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        ref = rms_norm_ref(x, w)
        block_n = 1 << (n - 1).bit_length()
        block_m = min(max(1, 8192 // block_n), 1 << (m - 1).bit_length())
        while block_m > 1 and -(-m // block_m) < 2 * rms_norm._num_sms(device):
            block_m //= 2
        before = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": 1, "num_warps": rms_norm._warps(block_m * block_n)}
        launch = partial(rms_norm._rms_norm_rows[(-(-m // block_m),)], x, w, y, m, n, n, 1e-6, **before)
        if _checked(launch, y, ref, f"rms_norm.rows {m}x{n} before"):
            yield ("rms_norm.rows", (m, n), "before (scalar rows)", launch, moved, False)
        cuts = {(rms_norm._window(n), 0, 0), rms_norm._parts(n)}
        for cut, warps, reread in itertools.product(sorted(cuts), (2, 4, 8, 16, 32), (False, True)):
            if sum(cut) // (32 * warps) < 8:
                continue
            plan, meta = rms_norm._realigned_plan(m, n, n, cut, warps, reread)
            launch = partial(_realigned_with_table, plan, meta, x, w, y)
            label = "+".join(str(p) for p in cut if p) + f" warps={warps}" + (" reread" if reread else "")
            if _checked(launch, y, ref, f"rms_norm.realigned {m}x{n} {label}"):
                yield ("rms_norm.realigned", (m, n), label, launch, moved, False)
        yield from _weight_variants(x, w, y, ref, moved)
        for name, other in _others("rms_norm", (x, w, 1e-6)):
            yield (f"rms_norm.{name}", (m, n), name, other, moved, False)


def _realigned_with_table(plan: Callable[..., object], meta: dict[str, Any], x: torch.Tensor, w: torch.Tensor,
                          y: torch.Tensor) -> None:
    m, n = x.shape
    wt = meta.get("WT", 0)
    plan(x, rms_norm._weight_table(w, wt) if wt > 0 else w, y, m, n, x.stride(0), 1e-6, **meta)


def _weight_variants(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, ref: torch.Tensor,
                     moved: int) -> Iterator[Trial]:
    """The planned realigned launch (rows off the 16-byte grid; planned: the weight from a table of its copies shifted
    by 0-7, built every call and read 16 bytes wide) with its weight read from w - shift, one scalar subtraction
    (WT=-1), and element by element (WT=0, the plan before)."""
    m, n = x.shape
    planned = rms_norm._plan(m, n, x.stride(0), x.element_size(), x.device)
    if isinstance(planned, rms_norm._Split | rms_norm._TwoPhase) or "WINDOW" not in planned[1]:
        return
    plan, meta = planned
    for label, wt in (("planned, weight from w - shift (WT=-1)", -1), ("planned, weight element by element (WT=0)", 0)):
        launch = partial(_realigned_with_table, plan, {**meta, "WT": wt}, x, w, y)
        if _checked(launch, y, ref, f"rms_norm.realigned {m}x{n} {label}"):
            yield ("rms_norm.realigned", (m, n), label, launch, moved, False)


def swiglu_parity_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The flat kernel over block sizes and warps beside torch.compile and Liger (contiguous inputs); --cupti to
    compare kernel time."""
    # 1-3 MB first (bandwidth.py's 4095 x 127 and 256 x 2048, where the kernel takes 2-3 us): how small programs help
    for m, n in ((4095, 127), (1024, 512), (256, 2048), (1024, 1024), (512, 2048), (4096, 4096), (4096, 11008),
                 (32768, 8192)):
        g = torch.randn(m, n, dtype=dtype, device=device)
        u = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(g)
        moved = 3 * g.numel() * g.element_size()
        yield ("swiglu.planned", (m, n), "planned", partial(swiglu.candidate, g, u), moved, True)
        for block, warps in itertools.product((256, 512, 1024, 2048, 4096, 8192), (1, 2, 4, 8, 16)):
            if not 4 <= block // (warps * 32) <= 32 or (block < 1024 and m * n > 1 << 21):
                continue
            yield ("swiglu.flat", (m, n), f"block={block} warps={warps}",
                   partial(swiglu._swiglu_flat[(-(-m * n // block),)], g, u, y, m * n, BLOCK=block, num_warps=warps),
                   moved, False)
        for name, other in _others("swiglu", (g, u)):
            yield (f"swiglu.{name}", (m, n), name, other, moved, False)


def swiglu_strided_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Strided rows (the task's padded `strided` case, and the two halves of fused [M, 2N] projections): the gather
    kernel over block sizes and warps against the 2-D tile kernel it replaced, beside torch.compile and Liger on the
    same views, after an fp32 check of each kernel."""
    import experimental_swiglu

    for m, n, stride in ((4096, 5000, 5024), (8192, 2880, 5760), (4096, 11008, 22016), (32768, 8192, 16384),
                         (16384, 14336, 28672)):
        base = torch.randn(m, stride + n, dtype=dtype, device=device)
        g, u = base[:, :n], base[:, stride:stride + n]  # row stride stride + n for both
        y = torch.empty((m, n), dtype=dtype, device=device)
        moved = 3 * m * n * base.element_size()
        ref = (torch.nn.functional.silu(g.float()) * u.float())
        yield ("swiglu.planned", (m, n), "planned", partial(swiglu.candidate, g, u), moved, True)
        row_stride = g.stride(0)
        vec = swiglu._align(base.element_size(), n, row_stride)
        wide = m * row_stride >= 2**31
        for block, warps in itertools.product((512, 1024, 2048, 4096), (2, 4, 8)):
            if not 4 <= block // (warps * 32) <= 16:
                continue
            launch = partial(swiglu._swiglu_gather[(-(-m * n // block),)], g, u, y, m * n, n, row_stride, row_stride,
                             BLOCK=block, VEC=vec, WIDE=wide, num_warps=warps)
            if _checked(launch, y, ref, f"swiglu.gather {m}x{n} block={block} warps={warps}"):
                yield ("swiglu.gather", (m, n), f"block={block} warps={warps}", launch, moved, False)
        for (block_m, block_n), warps in itertools.product(((1, 4096), (2, 2048), (4, 1024), (8, 512), (1, 8192)),
                                                           (4, 8, 16)):
            if block_m * block_n // (warps * 32) < 8:
                continue
            meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": vec, "num_warps": warps}
            launch = partial(experimental_swiglu._swiglu_rows[(-(-m // block_m), -(-n // block_n))], g, u, y, m, n,
                             row_stride, row_stride, **meta)
            if _checked(launch, y, ref, f"swiglu.rows {m}x{n} block={block_m}x{block_n} warps={warps}"):
                yield ("swiglu.rows", (m, n), f"block={block_m}x{block_n} warps={warps}", launch, moved, False)
        for name, other in _others("swiglu", (g, u)):
            yield (f"swiglu.{name}", (m, n), name, other, moved, False)


def _checked(launch: Launcher, y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """Run launch once (it writes y) and compare with an fp32 reference: a wrong config's timings mean nothing.
    Every kernel config the parity and realigned families time goes through here."""
    y.fill_(float("nan"))
    launch()
    bad = ~((y.float() - ref).abs() <= 1e-2 * ref.abs() + 1e-2)  # a 16-bit rounding is < 0.2%; NaN: never written
    if bad.any():
        print(f"{label}: WRONG at {int(bad.sum())} elements", flush=True)
        return False
    return True


def softmax_parity_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The row kernel without masks (EVEN), re-reading its tile for the output (REREAD), with evict-first loads
    (EVICT) and streaming stores (STREAM), over rows per program and warps, beside torch.compile and Liger; --cupti
    to compare kernel time."""
    variants = ((False, False, False, False), (True, False, False, False), (False, True, False, False),
                (True, True, False, False), (True, True, True, False), (True, True, False, True),
                (False, True, True, True))  # (EVEN, REREAD, EVICT, STREAM)
    for m, n in ((256, 2048), (4096, 3000), (4096, 4096), (8192, 8192), (32768, 8192), (65536, 1024),
                 (131072, 512), (16384, 2048)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        ref = torch.softmax(x.float(), -1)
        block_n = 1 << (n - 1).bit_length()
        for block_m, warps, (even, reread, evict, stream) in itertools.product((1, 2, 4, 8, 16), (4, 8, 16),
                                                                              variants):
            per_thread = block_m * block_n // (warps * 32)
            if per_thread < 8 or per_thread > 32 or block_m * block_n > 8192 or \
                    (even and (m % block_m or block_n != n)):
                continue
            meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": softmax._align(x.element_size(), n),
                    "EVEN": even, "REREAD": reread, "EVICT": evict, "STREAM": stream, "num_warps": warps}
            launch = partial(softmax._softmax_rows[(-(-m // block_m),)], x, y, m, n, n, **meta)
            label = f"block_m={block_m} warps={warps}" + (" even" if even else "") + (" reread" if reread else "") \
                + (" evict" if evict else "") + (" stream" if stream else "")
            if _checked(launch, y, ref, f"softmax.rows {m}x{n} {label}"):
                yield ("softmax.rows", (m, n), label, launch, moved, False)
        for name, other in _others("softmax", (x,)):
            yield (f"softmax.{name}", (m, n), name, other, moved, False)


def softmax_realigned_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows of 16385-32768, contiguous and padded (row strides that are and are not a multiple of a vector): the
    realigned kernel (windows on the output's vectors; padded rows' loads vectorised as far as the padding allows)
    over programs per SM, warps and FAST, against the row-addressed kernel and torch.compile and Liger, after an
    fp32 check of each config."""
    for m, n, pad in ((1723, 25249, 0), (2048, 32001, 0), (1003, 19382, 13), (1080, 30898, 7), (2048, 32000, 8),
                      (2047, 32000, 6)):
        x = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
        y = torch.empty((m, n), dtype=dtype, device=device)
        stride = x.stride(0)
        moved = 2 * x.numel() * x.element_size()
        ref = torch.softmax(x.float(), -1)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        sms = softmax._num_sms(device)
        for per_sm, warps, fast in itertools.product((1, 2), (16, 32), (False, True)):
            if not 8 <= softmax._window(n, x.element_size()) // (warps * 32) <= 64:
                continue
            kernel, meta = softmax._realigned_plan(m, n, stride, x.element_size(), sms, per_sm, warps, fast)
            launch = partial(kernel, x, y, m, n, stride, **meta)
            label = f"pad={pad} per_sm={per_sm} warps={warps}" + (" fast" if fast else "")
            if _checked(launch, y, ref, f"softmax.realigned {m}x{n} {label}"):
                yield ("softmax.realigned", (m, n), label, launch, moved, False)
        align = softmax._align(x.element_size(), n, stride)
        block_n = 1 << (n - 1).bit_length()
        if n > softmax._PIPELINED_MIN_N:  # before: the persistent row-addressed kernel
            launch = partial(softmax._softmax_pipelined[(min(m, softmax._PIPELINED_PER_SM * sms),)], x, y, m, n, stride,
                             BLOCK_N=block_n, ALIGN=align,
                             num_warps=softmax._PIPELINED_WARPS)
        else:  # before: one row per program
            launch = partial(softmax._softmax_rows[(m,)], x, y, m, n, stride, BLOCK_M=1, BLOCK_N=block_n, ALIGN=align,
                             num_warps=16 if block_n == 8192 else softmax._warps(block_n))
        if _checked(launch, y, ref, f"softmax.row_addressed {m}x{n}"):
            yield ("softmax.row_addressed", (m, n), f"align={align}", launch, moved, False)
        for name, other in _others("softmax", (x,)):
            yield (f"softmax.{name}", (m, n), name, other, moved, False)


def softmax_realigned_narrow_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Unaligned rows of 2049-16384, which the plan leaves on the row kernel (scalar accesses: `hidden_constant`
    4056 x 5207 reached 52% of copy): the realigned kernel over programs per SM and warps (8-64 elements per thread
    of its window), contiguous and padded, against the planned launch, after an fp32 check of each config."""
    for m, n, pad in ((4056, 5207, 0), (2204, 6933, 0), (4096, 8191, 0), (4096, 12901, 0), (8192, 3001, 0),
                      (4096, 8191, 5)):
        x = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
        y = torch.empty((m, n), dtype=dtype, device=device)
        moved = 2 * x.numel() * x.element_size()
        ref = torch.softmax(x.float(), -1)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        for per_sm, warps in itertools.product((1, 2, 4, 8), (4, 8, 16, 32)):
            if not 8 <= softmax._window(n, x.element_size()) // (warps * 32) <= 64 or per_sm * warps > 64:
                continue
            kernel, meta = softmax._realigned_plan(m, n, x.stride(0), x.element_size(), softmax._num_sms(device),
                                                   per_sm, warps, False)
            launch = partial(kernel, x, y, m, n, x.stride(0), **meta)
            label = f"pad={pad} per_sm={per_sm} warps={warps}"
            if _checked(launch, y, ref, f"softmax.realigned {m}x{n} {label}"):
                yield ("softmax.realigned", (m, n), label, launch, moved, False)


def softmax_realigned_bounds_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The realigned kernel's ways of staying inside the input (experimental_realigned.py: over-reading, the
    shipped bounds mask and reload, a branch-free tail select, the last row in a second launch, edge vectors read
    element by element, the interior kernel with the edges in a tile of their own, with exp2 on a fused multiply-add)
    and without its element-wise edge stores (timing only), over programs per SM and warps, beside the shipped
    launch."""
    for m, n in ((1723, 25249), (2048, 32001), (2048, 32000)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        ref = torch.softmax(x.float(), -1)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for bound, edge, (per_sm, warps) in itertools.product((0, 1, 2, 3, 4, 5, 6), (True, False),
                                                                  ((1, 32), (1, 16), (2, 16))):
            if (not edge and bound != 0) or (n % 8 == 0 and bound < 5):  # aligned rows: the interior kernel only
                continue
            launch = partial(experimental_realigned.softmax_realigned_x, x, y, bound, edge, per_sm, warps)
            label = f"bound={bound}{'' if edge else ' no-edge-stores(wrong)'} per_sm={per_sm} warps={warps}"
            if not edge or _checked(launch, y, ref, f"softmax.realigned_x {m}x{n} {label}"):
                yield ("softmax.realigned_x", (m, n), label, launch, moved, False)
        # the persistent row-addressed kernel as the pipelined path launches it (aligned rows took it before)
        launch = partial(softmax._softmax_pipelined[(min(m, softmax._PIPELINED_PER_SM * softmax._num_sms(device)),)],
                         x, y, m, n, n, BLOCK_N=1 << (n - 1).bit_length(),
                         ALIGN=softmax._align(x.element_size(), n), num_warps=softmax._PIPELINED_WARPS)
        if _checked(launch, y, ref, f"softmax.pipelined {m}x{n}"):
            yield ("softmax.pipelined", (m, n), "row-addressed", launch, moved, False)


def softmax_packed_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows of 32000-32768 (the pipelined path, 82-88% of copy bandwidth in the campaigns; fp16 behind bf16): the
    shipped persistent kernel launched directly over programs per SM, warps and PACKED (rows carried as int32 words
    of two elements, which halves the prefetched row's registers), with each config's registers and spills."""
    for m, n in ((2048, 32000), (4096, 32768)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        ref = torch.softmax(x.float(), -1)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        sms = softmax._num_sms(device)
        align = softmax._align(x.element_size(), n)
        for per_sm, warps, prefetch, packed in itertools.product((1, 2), (16, 32), (True, False), (False, True)):
            if (packed and x.element_size() != 2) or (not prefetch and (packed or (per_sm, warps) != (2, 16))):
                continue
            meta = {"BLOCK_N": 1 << (n - 1).bit_length(), "PREFETCH": prefetch, "PACKED": packed, "ALIGN": align,
                    "num_warps": warps}
            launch = partial(experimental_kernels._softmax_pipelined[(min(m, per_sm * sms),)], x, y, m, n, n, **meta)
            label = f"per_sm={per_sm} warps={warps}" + ("" if prefetch else " no-prefetch") + \
                (" packed" if packed else "")
            if _checked(launch, y, ref, f"softmax.pipelined {m}x{n} {label}"):
                yield ("softmax.pipelined", (m, n), label, launch, moved, False)


def wide_looped_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows too wide for one program: the built-ins as planned (split or staged paths) against the looped design with
    software-pipelined loads (experimental_looped.py), over chunk, warps, pipeline stages (1: unpipelined) and
    programs per SM, after an fp32 check of each design."""
    for task, m, n in (("rms_norm", 345, 64803), ("rms_norm", 1024, 65536), ("rms_norm", 2048, 24577),
                       ("rms_norm", 1024, 40000), ("softmax", 2048, 32768), ("softmax", 1024, 65536),
                       ("softmax", 512, 128256), ("softmax", 1024, 131072)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        if task == "rms_norm":
            w = torch.randn(n, dtype=dtype, device=device)
            yield rms_norm_planned(x, w, moved)
            ref = rms_norm_ref(x, w)
            run: Callable[..., torch.Tensor] = partial(experimental_looped.rms_norm_looped, x, w, 1e-6)
        else:
            yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
            ref = torch.softmax(x.float(), -1)
            run = partial(experimental_looped.softmax_looped, x)
        err = (run(4096, 8, 3, 2).float() - ref).abs().max().item()
        print(f"{task}.looped {m}x{n}: max |error| vs fp32 {err:.3g}", flush=True)
        if err > 0.1:
            continue
        for chunk, warps, stages, per_sm in itertools.product((2048, 4096), (4, 8), (1, 3, 5), (1, 2)):
            if chunk // (warps * 32) < 8:
                continue
            yield (f"{task}.looped", (m, n), f"chunk={chunk} warps={warps} stages={stages} per_sm={per_sm}",
                   partial(run, chunk, warps, stages, per_sm, y=y), moved, False)
