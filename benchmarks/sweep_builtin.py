"""Sweep families of the built-in kernels themselves: each built-in kernel launched directly with a grid of launch
parameters on the shapes where it falls short (the heuristic's own choice marked `chosen`), and the experimental
split, pipelined and looped kernels (experimental_kernels.py) beside the built-in's planned launch. Run by
kernel_sweep.py (`--only softmax`, `rms_norm`, `rms_norm_wide`, ...)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import experimental_kernels
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref

from kernelproof_core.kernels import rms_norm, softmax, swiglu
from kernelproof_core.tasks import get_task


@dataclass
class _Staged:
    """Softmax's staged path with explicit parameters (the built-in's own choice comes from _staged_plan)."""

    x: torch.Tensor
    y: torch.Tensor
    chunk: int
    rows_per_batch: int
    warps: int
    chunks: int = 1  # chunks per program

    def __call__(self) -> None:
        m, n = self.x.shape
        n_parts = -(-n // (self.chunk * self.chunks))
        n_batches = -(-m // self.rows_per_batch)
        partials = torch.empty((2, m, n_parts), dtype=torch.float32, device=self.x.device)
        done = torch.zeros((m,), dtype=torch.int32, device=self.x.device)
        grid = (2 * n_batches * self.rows_per_batch * n_parts,)
        softmax._softmax_staged[grid](self.x, self.y, partials, done, m, n, n, n_parts, self.rows_per_batch,
                                      n_batches, CHUNK=self.chunk, CHUNKS=self.chunks,
                                      BLOCK_S=1 << max(0, (n_parts - 1).bit_length()),
                                      ALIGN=softmax._align(self.x.element_size(), n), num_warps=self.warps)


@dataclass
class _Split:
    """Softmax's split path (chunks held in registers across a per-row rendezvous) with explicit parameters."""

    x: torch.Tensor
    y: torch.Tensor
    chunk_bytes: int
    warps: int

    def __call__(self) -> None:
        m, n = self.x.shape
        plan = softmax._split_plan(m, n, self.x.element_size(), softmax._align(self.x.element_size(), n),
                                   self.chunk_bytes, self.warps)
        partials = torch.empty((2, m, plan.n_parts), dtype=torch.float32, device=self.x.device)
        done = torch.zeros((m,), dtype=torch.int32, device=self.x.device)
        plan.launch(self.x, self.y, partials, done, m, n, n, plan.n_parts, **plan.meta)


def softmax_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in ((4096, 4096), (8192, 8192), (32768, 8192), (2048, 32768), (1991, 33508), (1024, 65536),
                 (512, 128256)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        elsize = x.element_size()
        moved = 2 * x.numel() * elsize
        plan = softmax._plan(m, n, n, elsize, device)
        if n <= softmax._MAX_FUSED_N:
            block_n = 1 << (n - 1).bit_length()
            for block_m, warps in itertools.product((1, 2), (4, 8, 16)):
                if block_m * block_n > 16384 or block_m * block_n // (32 * warps) < 8:
                    continue
                meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": softmax._align(elsize, n),
                        "num_warps": warps}
                chosen = isinstance(plan, tuple) and not isinstance(plan, (softmax._Staged, softmax._Split)) \
                    and plan[1] == meta
                yield ("softmax.rows", (m, n), f"block_m={block_m} warps={warps}",
                       partial(softmax._softmax_rows[(-(-m // block_m),)], x, y, m, n, n, **meta), moved, chosen)
        if n > 16384:
            for chunk_bytes, warps in ((8192, 4), (16384, 8), (32768, 8)):
                chosen = (isinstance(plan, softmax._Split) and plan.meta["CHUNK"] * elsize == chunk_bytes
                          and plan.meta["num_warps"] == warps)
                yield ("softmax.split", (m, n), f"chunk={chunk_bytes // elsize} warps={warps}",
                       _Split(x, y, chunk_bytes, warps), moved, chosen)
            ref = torch.softmax(x.float(), -1)
            for chunk_bytes, warps, per_sm, prefetch in ((16384, 8, 1, True), (16384, 4, 2, True), (8192, 4, 4, True),
                                                         (16384, 8, 2, True), (16384, 8, 1, False)):
                persistent = partial(experimental_kernels.softmax_split_persistent, x, chunk_bytes // elsize, warps,
                                     per_sm, prefetch, y)
                persistent()  # checked against eager before its timings mean anything
                print(f"softmax.split_persistent {m}x{n} chunk={chunk_bytes // elsize} warps={warps} "
                      f"per_sm={per_sm}: max |error| vs fp32 eager {(y.float() - ref).abs().max().item():.3g}",
                      flush=True)
                yield ("softmax.split_persistent", (m, n), f"chunk={chunk_bytes // elsize} warps={warps} "
                       f"per_sm={per_sm}{'' if prefetch else ' no-prefetch'}", persistent, moved, False)
            # the split path is checked against eager here, before its timings mean anything
            _Split(x, y, softmax._SPLIT_CHUNK_BYTES, softmax._SPLIT_WARPS)()
            err = (y.float() - torch.softmax(x.float(), -1)).abs().max().item()
            print(f"softmax.split {m}x{n}: max |error| vs fp32 eager {err:.3g}", flush=True)
        if n > softmax._MAX_FUSED_N:
            for chunk_bytes, batch_mb, warps, chunks in ((16384, 8, 4, 1), (16384, 8, 4, 2)):
                chunk = chunk_bytes // elsize
                rows = min(m, max(1, (batch_mb << 20) // (n * elsize)))
                chosen = (isinstance(plan, softmax._Staged) and plan.meta["CHUNK"] == chunk
                          and plan.meta["CHUNKS"] == chunks and plan.rows_per_batch == rows
                          and plan.meta["num_warps"] == warps)
                yield ("softmax.staged", (m, n), f"chunk={chunk}x{chunks} batch={rows} rows warps={warps}",
                       _Staged(x, y, chunk, rows, warps, chunks), moved, chosen)


def rms_norm_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in ((8192, 2880), (8192, 4096), (16384, 8192), (32768, 8192), (65536, 4096)):
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        plan = rms_norm._plan(m, n, n, x.element_size(), device)
        align = rms_norm._align(x.element_size(), n)
        block_n = 1 << (n - 1).bit_length()
        for block_m, warps in itertools.product((1, 2, 4), (4, 8, 16)):
            per_thread = block_m * block_n // (warps * 32)
            if per_thread < 8 or per_thread > 64:
                continue
            meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align, "num_warps": warps}
            grid = (-(-m // block_m),)
            yield ("rms_norm.rows", (m, n), f"block_m={block_m} warps={warps}",
                   partial(rms_norm._rms_norm_rows[grid], x, w, y, m, n, n, 1e-6, **meta),
                   moved, plan[1] == meta)


def rms_norm_split_counters_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows past 32768 off the vector grid (realigned split with the weight table; the built-in takes the two-phase
    path on some since 39c1cff): the split, whose table launch also zeroes the row counters, against the same
    launches with the counters zeroed by a separate fill before."""
    for m, n in ((345, 64803), (265, 61298), (270, 63553), (16, 41643), (1024, 40001)):
        x, w, _y, moved = rms_norm_inputs(m, n, dtype, device)
        # some are two-phase since 39c1cff, resident since the resident path
        plan = rms_norm._plan(m, n, n, x.element_size(), device, two_phase=False, resident=False)
        if not isinstance(plan, rms_norm._Split) or not plan.meta.get("WT"):
            print(f"rms_norm.split_counters {m}x{n}: not the realigned split here", flush=True)
            continue

        def zeroed_by_table(x: torch.Tensor = x, w: torch.Tensor = w, plan: rms_norm._Split = plan) -> torch.Tensor:
            out = torch.empty_like(x)
            rms_norm._run(plan, x, w, out, 1e-6)
            return out

        yield ("rms_norm.split_counters", (m, n), "split, counters zeroed by the table's launch", zeroed_by_table,
               moved, True)

        def separate(x: torch.Tensor = x, w: torch.Tensor = w, plan: rms_norm._Split = plan) -> torch.Tensor:
            out = torch.empty_like(x)
            partials = torch.empty((x.shape[0], plan.n_parts), dtype=torch.float32, device=x.device)
            done = torch.zeros((x.shape[0],), dtype=torch.int32, device=x.device)
            table = rms_norm._weight_table(w, plan.meta["WT"])
            plan.launch(x, table, out, partials, done, x.shape[1], x.stride(0), 1e-6, plan.n_parts, **plan.meta)
            return out

        ok = rms_norm_close(separate(), rms_norm_ref(x, w), f"rms_norm.split_counters {m}x{n} separate fill")
        if ok:
            yield ("rms_norm.split_counters", (m, n), "separate zero fill (before)", separate, moved, False)


def rms_norm_wide_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows too wide for one program: the built-in as planned (split path on a GPU), the looped path it replaced,
    the split path's other parameters, and the split path on a persistent grid and realigned to vector boundaries
    (experimental_kernels)."""
    for m, n in ((345, 64803), (1024, 65536), (2048, 24577), (1024, 40000)):
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        elsize = x.element_size()
        yield rms_norm_planned(x, w, moved)
        launch, meta = rms_norm._looped_plan(m, n, elsize, rms_norm._align(elsize, n), rms_norm._num_sms(device))
        yield ("rms_norm.looped", (m, n), " ".join(f"{k}={v}" for k, v in meta.items()),
               partial(launch, x, w, y, m, n, n, 1e-6, **meta), moved, False)
        for chunk, warps in ((4096, 4), (8192, 4), (8192, 8), (16384, 8), (16384, 16)):
            yield ("rms_norm.split", (m, n), f"chunk={chunk} warps={warps}",
                   partial(experimental_kernels.rms_norm_split, x, w, 1e-6, chunk, warps, y), moved, False)
        ref = rms_norm_ref(x, w)
        for chunk, warps, shifted in ((8192, 4, False), (8192, 4, True), (4096, 4, True), (8192, 8, True)):
            realigned = partial(experimental_kernels.rms_norm_split_realigned, x, w, 1e-6, chunk, warps, y, shifted)
            realigned()  # checked against an fp32 reference before its timings mean anything
            print(f"rms_norm.split_realigned {m}x{n} chunk={chunk} warps={warps} shifted_weight={shifted}: max "
                  f"|error| vs fp32 {(y.float() - ref).abs().max().item():.3g}", flush=True)
            yield ("rms_norm.split_realigned", (m, n),
                   f"chunk={chunk} warps={warps}{' shifted-w' if shifted else ''}", realigned, moved, False)
        for chunk, warps, per_sm, prefetch in ((8192, 4, 1, True), (8192, 4, 2, True), (8192, 4, 4, True),
                                               (8192, 8, 1, True), (4096, 4, 4, True), (8192, 4, 2, False)):
            persistent = partial(experimental_kernels.rms_norm_split_persistent, x, w, 1e-6, chunk, warps, per_sm,
                                 prefetch, y)
            persistent()  # checked against an fp32 reference before its timings mean anything
            err = (y.float() - ref).abs().max().item()
            print(f"rms_norm.split_persistent {m}x{n} chunk={chunk} warps={warps} per_sm={per_sm}: max |error| vs "
                  f"fp32 {err:.3g}", flush=True)
            yield ("rms_norm.split_persistent", (m, n),
                   f"chunk={chunk} warps={warps} per_sm={per_sm}{'' if prefetch else ' no-prefetch'}", persistent,
                   moved, False)
        # checked against an fp32 reference before its timings mean anything
        out = experimental_kernels.rms_norm_split(x, w, 1e-6, 8192, 4)
        err = (out.float() - rms_norm_ref(x, w)).abs().max().item()
        print(f"rms_norm.split {m}x{n}: max |error| vs fp32 {err:.3g}; replay bit-exact "
              f"{torch.equal(out, experimental_kernels.rms_norm_split(x, w, 1e-6, 8192, 4))}", flush=True)


def rms_norm_looped_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows that fit in registers, looped instead: one program per row reads it twice in small chunks (the second
    read from L2), as torch.compile's generated rms_norm does (benchmarks/inductor_kernels.py), with and without its
    eviction hints. Small chunks mean few registers and many programs per SM."""
    for m, n in ((256, 2048), (8192, 4096), (16384, 8192), (32768, 8192), (65536, 4096)):
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        align = rms_norm._align(x.element_size(), n)
        # (n, 16): inductor's run-time choice for 4096- and 8192-wide rows (inductor_kernels.py "chosen at run time")
        configs = ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16))
        for (chunk, warps), evict in itertools.product(configs, (False, True)):
            if chunk > 1 << (n - 1).bit_length():
                continue
            launch = partial(rms_norm._rms_norm_wide[(m,)], x, w, y, m, n, n, 1e-6, CHUNK=chunk, ALIGN=align,
                             EVICT=evict, num_warps=warps)
            yield ("rms_norm.looped", (m, n), f"chunk={chunk} warps={warps}{' evict' if evict else ''}", launch,
                   moved, False)
        launch()  # the last config, checked against an fp32 reference before its timings mean anything
        err = (y.float() - rms_norm_ref(x, w)).abs().max().item()
        print(f"rms_norm.looped {m}x{n}: max |error| vs fp32 {err:.3g}", flush=True)


def _pipelined_guess(block_n: int, elsize: int) -> tuple[int, int]:
    """(programs_per_sm, warps) best guess: about 32 KB of prefetched rows per SM (one row from 16384 elements of
    bf16 up), ~32 elements per thread (64 at 32768, as the built-in's 16 warps)."""
    return max(1, min(4, (32 << 10) // (block_n * elsize))), min(16, max(4, block_n // 1024))


def _pipelined_configs(block_n: int, elsize: int) -> list[tuple[int, int, bool, bool]]:
    """(programs_per_sm, warps, prefetch, packed) for the pipelined kernels: the prefetching grid (8 to 64 elements
    of a row per thread), then the best guess without prefetch and, for 16-bit dtypes, with packed rows."""
    per_sm, warps = _pipelined_guess(block_n, elsize)
    configs = [(p, w, True, False) for p in (1, 2, 4) for w in (4, 8, 16, 32) if 8 <= block_n // (32 * w) <= 64]
    configs.append((per_sm, warps, False, False))
    if elsize == 2:
        configs.append((per_sm, warps, True, True))
    return configs


def _pipelined_label(programs_per_sm: int, warps: int, prefetch: bool, packed: bool) -> str:
    return f"per_sm={programs_per_sm} warps={warps}" + ("" if prefetch else " no-prefetch") + \
        (" packed" if packed else "")


def _check_pipelined(kind: str, x: torch.Tensor, ref: torch.Tensor,
                     run: Callable[..., torch.Tensor]) -> None:
    """A pipelined kernel against an fp32 reference, and a replay, at the best guess (plain and packed rows): before
    its timings mean anything."""
    m, n = x.shape
    per_sm, warps = _pipelined_guess(1 << (n - 1).bit_length(), x.element_size())
    for packed in (False, True) if x.element_size() == 2 else (False,):
        out = run(per_sm, warps, packed=packed)
        err = (out.float() - ref).abs().max().item()
        print(f"{kind} {m}x{n} {_pipelined_label(per_sm, warps, True, packed)}: max |error| vs fp32 {err:.3g}; "
              f"replay bit-exact {torch.equal(out, run(per_sm, warps, packed=packed))}", flush=True)


def softmax_pipelined_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The built-in's launch against the experimental persistent kernel that prefetches each program's next row."""
    for m, n in ((4096, 4096), (8192, 8192), (4096, 16384), (2048, 32000), (4096, 32768)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        elsize = x.element_size()
        moved = 2 * x.numel() * elsize
        _check_pipelined("softmax.pipelined", x, torch.softmax(x.float(), -1),
                         partial(experimental_kernels.softmax_pipelined, x))
        plan = softmax._plan(m, n, n, elsize, device)
        assert not isinstance(plan, (softmax._Staged, softmax._Split))  # every row here fits in registers
        launch, meta = plan
        yield ("softmax.planned", (m, n), " ".join(f"{k}={v}" for k, v in meta.items()),
               partial(launch, x, y, m, n, n, **meta), moved, True)
        for per_sm, warps, prefetch, packed in _pipelined_configs(1 << (n - 1).bit_length(), elsize):
            yield ("softmax.pipelined", (m, n), _pipelined_label(per_sm, warps, prefetch, packed),
                   partial(experimental_kernels.softmax_pipelined, x, per_sm, warps, prefetch, y, packed), moved,
                   False)


def rms_norm_pipelined_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The built-in's launch against the experimental persistent kernel that prefetches each program's next row."""
    for m, n in ((8192, 2880), (8192, 4096), (16384, 8192), (32768, 8192), (4096, 4940)):
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        elsize = x.element_size()
        _check_pipelined("rms_norm.pipelined", x, rms_norm_ref(x, w),
                         partial(experimental_kernels.rms_norm_pipelined, x, w, 1e-6))
        yield rms_norm_planned(x, w, moved)
        for per_sm, warps, prefetch, packed in _pipelined_configs(1 << (n - 1).bit_length(), elsize):
            yield ("rms_norm.pipelined", (m, n), _pipelined_label(per_sm, warps, prefetch, packed),
                   partial(experimental_kernels.rms_norm_pipelined, x, w, 1e-6, per_sm, warps, prefetch, y, packed),
                   moved, False)

def small_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """1-3 MB cases, where torch.compile's kernels were ahead (bandwidth.py: rms_norm 256 x 2048 at 0.84-0.87 of it,
    swiglu 0.94-0.96): each built-in's row or flat kernel over a grid of rows per program and warps, beside
    torch.compile's kernel for the same eager reference, timed the same way."""
    m, n = 256, 2048
    x = torch.randn(m, n, dtype=dtype, device=device)
    w = torch.randn(n, dtype=dtype, device=device)
    y = torch.empty_like(x)
    moved = 2 * x.numel() * x.element_size()
    align = rms_norm._align(x.element_size(), n)
    for block_m, warps in itertools.product((1, 2, 4, 8), (1, 2, 4, 8, 16)):
        if block_m * n // (warps * 32) < 8:
            continue
        meta = {"BLOCK_M": block_m, "BLOCK_N": n, "ALIGN": align, "num_warps": warps}
        yield ("rms_norm.rows", (m, n), f"block_m={block_m} warps={warps}",
               partial(rms_norm._rms_norm_rows[(-(-m // block_m),)], x, w, y, m, n, n, 1e-6, **meta), moved,
               rms_norm._plan(m, n, n, x.element_size(), device)[1] == meta)
    yield ("rms_norm.inductor", (m, n), "torch.compile",
           partial(torch.compile(get_task("rms_norm").baseline()), x, w, 1e-6), moved, False)
    for block_m, warps in itertools.product((1, 2, 4, 8), (1, 2, 4, 8, 16)):
        if block_m * n // (warps * 32) < 8:
            continue
        meta = {"BLOCK_M": block_m, "BLOCK_N": n, "ALIGN": softmax._align(x.element_size(), n), "num_warps": warps}
        yield ("softmax.rows", (m, n), f"block_m={block_m} warps={warps}",
               partial(softmax._softmax_rows[(-(-m // block_m),)], x, y, m, n, n, **meta), moved, False)
    yield ("softmax.inductor", (m, n), "torch.compile", partial(torch.compile(get_task("softmax").baseline()), x),
           moved, False)
    u = torch.randn(m, n, dtype=dtype, device=device)
    moved3 = 3 * x.numel() * x.element_size()
    for block, warps in itertools.product((512, 1024, 2048, 4096), (1, 2, 4, 8)):
        if block // (warps * 32) < 4:
            continue
        yield ("swiglu.flat", (m, n), f"block={block} warps={warps}",
               partial(swiglu._swiglu_flat[(-(-m * n // block),)], x, u, y, m * n, BLOCK=block, num_warps=warps),
               moved3, swiglu._plan(m, n, n, n, x.element_size(), device)[1] == {"BLOCK": block, "num_warps": warps})
    yield ("swiglu.inductor", (m, n), "torch.compile",
           partial(torch.compile(get_task("swiglu").baseline()), x, u), moved3, False)
