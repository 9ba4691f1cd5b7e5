"""Launch plans of the built-in kernels that must hold on any host: which wide-row softmax and rms_norm path runs
where.

The split paths make a row's programs wait for each other, which only works when they run at the same time: on a
GPU, compiled. The interpreter runs programs one after another, so they must never be chosen there, whatever device
the tensors claim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from kernelproof_core.kernels import rms_norm, softmax


@pytest.mark.parametrize("n", [32769, 65536, 131072])
def test_wide_softmax_takes_the_staged_path_off_the_gpu(n: int) -> None:
    assert isinstance(softmax._plan(64, n, n, 2, torch.device("cpu")), softmax._Staged)


def test_interpreted_kernels_never_take_the_split_path() -> None:
    if isinstance(softmax._softmax_split, softmax.triton.JITFunction):
        pytest.skip("kernels are compiled in this process (GPU run): tests/gpu/test_gpu_builtin_kernels.py covers it")
    # No CUDA needed: the plan is decided before any device query.
    assert isinstance(softmax._plan(64, 65536, 65536, 2, torch.device("cuda")), softmax._Staged)


def test_split_plan_covers_the_row_with_a_power_of_two_partials_block() -> None:
    plan = softmax._split_plan(3, 33508, 2, softmax._align(2, 33508))
    assert plan.meta["CHUNK"] * plan.n_parts >= 33508 > plan.meta["CHUNK"] * (plan.n_parts - 1)
    assert plan.meta["BLOCK_S"] >= plan.n_parts and plan.meta["BLOCK_S"] & (plan.meta["BLOCK_S"] - 1) == 0


@pytest.mark.parametrize(("n", "stride"), [(33508, 33508), (40001, 40009), (65535, 65535), (32769, 32772)])
def test_unaligned_split_softmax_cuts_chunks_from_the_vector_window(n: int, stride: int) -> None:
    """Unaligned 16-bit rows (8 KB chunks) and fp32 rows (16 KB) of the split range: chunks covering the row's window
    (up to n + VEC - 1 positions), x read as aligned as its padding allows."""
    for elsize, chunk_elements in ((2, 4096), (4, 4096)):  # 8 KB of bf16, 16 KB of fp32
        plan = softmax._split_realigned_plan(64, n, stride, elsize)
        chunk, vec = plan.meta["CHUNK"], 16 // elsize
        assert chunk == chunk_elements and plan.meta["REALIGNED"] and plan.meta["VEC"] == vec
        assert plan.meta["num_warps"] == 4
        assert chunk * plan.n_parts >= n + vec - 1 > chunk * (plan.n_parts - 1)
        assert plan.meta["ALIGN"] == softmax._align(elsize, stride - n) and plan.meta["BLOCK_S"] >= plan.n_parts


@pytest.mark.parametrize(("n", "stride", "path"), [
    (8192, 8192, "rows"), (16384, 16384, "rows"), (16386, 16386, "realigned"), (32768, 32768, "realigned"),
    (25249, 25249, "realigned"), (25249, 25256, "realigned"), (25248, 25256, "realigned"), (4097, 4097, "realigned"),
    (12901, 12901, "realigned"), (16382, 16382, "realigned"), (32767, 32767, "pipelined"), (32761, 32761, "realigned"),
    (16392, 16392, "realigned"), (32000, 32000, "realigned"), (32768, 32776, "realigned"), (32767, 32780, "pipelined"),
    (2049, 2049, "realigned"), (2047, 2047, "rows"), (3001, 3001, "realigned"), (5207, 5215, "realigned"),
    (5207, 5212, "realigned"), (8191, 8191, "realigned"), (5208, 5208, "realigned"), (6000, 6004, "realigned"),
    (3000, 3000, "rows"), (6608, 6608, "realigned"), (4096, 4096, "rows"),
    (9600, 9600, "realigned"), (12288, 12296, "realigned"), (12288, 12290, "realigned"), (16000, 16000, "rows"),
    (9554, 9554, "realigned"), (12345, 12345, "realigned"), (16655, 16658, "realigned"), (24001, 24002, "realigned"),
    (30001, 30008, "realigned"), (9001, 9006, "realigned"), (3001, 3004, "realigned"), (8001, 8007, "realigned"),
    (2047, 2050, "rows"), (13778, 13778, "realigned"), (12001, 12001, "realigned"), (14293, 14313, "realigned"),
    (11007, 11011, "realigned")])
def test_softmax_row_paths_by_width_and_alignment(n: int, stride: int, path: str) -> None:
    """Rows past 16384, contiguous or padded, take the realigned path when their vector window is no wider than
    their tile; 32767 can start mid-vector, so its window would double, and it takes the pipelined path; 16382 can
    too (a span past 16384), and takes the wide rows' config. Unaligned 16-bit rows of 2049-16384 take it too where
    x's padding is whole vectors, and so do aligned ones of 4097-16383
    whose window parts are fewer lanes than the row kernel's tile (9600: 8192 + 2048; not 16000, one 16384 window
    either way; not 3000, where the row kernel wins). Rows padded off the vector grid (x read at most ALIGN_X
    elements at a time) take it from 2049 wide, on 8 warps over 8192 lanes, their window in parts up to 32768 lanes
    (one window of 32768 spills)."""
    _launch, meta = softmax._plan(4096, n, stride, 2, torch.device("cpu"))  # type: ignore[misc]
    taken = "realigned" if "WINDOW" in meta else "rows" if "BLOCK_M" in meta else "pipelined"
    assert taken == path
    if path == "pipelined":
        assert meta["BLOCK_N"] >= n
    if path == "realigned":
        parts = [meta["WINDOW"], meta["PART1"], meta["PART2"]]
        span = n if n % 8 == 0 else n + 7
        lanes = sum(parts)
        assert meta["VEC"] == 8 and span <= lanes
        off_grid = softmax._align(2, stride - n) < 8
        if meta.get("THREAD_STATS"):  # one reduction a row, on a window swept for it (bf16: the default dtype)
            assert meta["THREAD_STATS"] == 32 * meta["num_warps"]
            assert tuple(parts) in softmax._THREAD_STATS_WINDOWS[torch.bfloat16][meta["num_warps"]]
            assert not off_grid and (n <= 16384 or parts[1] or parts == [32768, 0, 0])
            parts = list(softmax._parts(n, 2))  # the window it replaced, which the checks below describe
            lanes = sum(parts)
        if n > 16384 and not off_grid:  # one power-of-two window (parts measured slower there)
            assert parts == [1 << (n - 1).bit_length(), 0, 0]
        elif parts[1:] == [0, 0]:  # one window where seven eighths would need four parts
            assert parts[0] == softmax._window(n, 2)
        else:  # at most three power-of-two parts, largest first, no smaller than 1024; idle: an eighth, or a part
            assert all(p & (p - 1) == 0 for p in parts) and parts == sorted(parts, reverse=True)
            assert min(p for p in parts if p) >= 1024 and lanes - span < max(parts[0] // 8, 1024)
        # padded rows' loads vectorise as far as their padding allows, element by element: x as words lost 17-37
        # points on rows padded off the grid (H200, evidence/h200/2026-12-04_padded_words/3_*)
        assert meta["ALIGN_X"] == softmax._align(2, stride - n) and (stride - n) % meta["ALIGN_X"] == 0
        assert not (off_grid and meta["WORDS"])
        # up to 8192 lanes: 8 programs per SM on 4 warps to 5120 lanes or with a 1024 part, else 8 (H200 sweep);
        # wider: 16 warps unless a part is under 2048 or the window has three parts
        smallest = min(p for p in parts if p)
        narrow = 4 if lanes <= 5120 or smallest < 2048 else 8
        expected = narrow if lanes <= 8192 else 8 if off_grid or (n <= 16384 and (smallest < 2048 or parts[2])) else 16
        assert meta["num_warps"] == expected


@pytest.mark.parametrize(("n", "stride", "bf16", "fp16"), [
    (16377, 16377, (16384, 0, 0), (16384, 0, 0)), (14500, 14500, (16384, 0, 0), (16384, 0, 0)),
    (16383, 16383, (16384, 4096, 0), (16384, 4096, 0)), (32000, 32008, (32768, 0, 0), (32768, 0, 0)),
    (16381, 16383, (16384, 4096, 0), (16384, 4096, 0)),
    (18001, 18001, (16384, 4096, 0), (16384, 4096, 0)), (20480, 20488, (16384, 4096, 0), (16384, 4096, 0)),
    (20001, 20001, (16384, 4096, 0), (16384, 4096, 0)),
    (22001, 22001, (16384, 8192, 0), (16384, 8192, 0)), (24576, 24576, (16384, 8192, 0), (16384, 8192, 0)),
    (24577, 24577, (32768, 0, 0), (32768, 0, 0)), (25249, 25249, (32768, 0, 0), (32768, 0, 0)),
    (32768, 32768, (32768, 0, 0), (32768, 0, 0)),
    (8185, 8185, (8192, 0, 0), None), (8191, 8191, (8192, 2048, 0), None), (3001, 3001, (2048, 1024, 0), None),
    (6608, 6608, (4096, 2048, 1024), (4096, 2048, 1024)), (3185, 3185, (4096, 0, 0), (4096, 0, 0)),
    (5000, 5000, (4096, 1024, 0), None), (12345, 12345, (8192, 4096, 2048), (8192, 4096, 2048)),
    (13778, 13778, (8192, 4096, 2048), (8192, 4096, 2048)), (14336, 14336, (8192, 4096, 2048), (8192, 4096, 2048)),
    (9554, 9554, (8192, 4096, 0), (8192, 4096, 0)), (12074, 12074, (8192, 4096, 0), (8192, 4096, 0)),
    (12288, 12288, (8192, 4096, 0), (8192, 4096, 0)), (9001, 9001, (8192, 2048, 0), None), (11007, 11007, None, None),
    (20000, 20002, None, None), (5999, 5999, None, None)])
def test_softmax_plans_one_reduction_a_row_where_it_measured_faster(
        n: int, stride: int, bf16: tuple[int, int, int] | None, fp16: tuple[int, int, int] | None) -> None:
    """THREAD_STATS per dtype on the realigned windows the H200 sweeps (softmax_thread_stats, softmax_exp_forms)
    measured it faster on: bf16 on every window swept (16 warps: 32768 lanes, one 16384, rows of 16385-24576 positions
    on two parts of whole vectors a thread; 8 warps: 8192, and 8192+2048 in place of 8192+1024; 4 warps), fp16 with x
    read as words (WORDS) on the same 16-warp windows, and on 4 warps on one 4096-lane window and 4096+2048+1024 (not
    4096+1024 nor 3001's 2048+1024); both dtypes on 8192+4096 on 16 warps (rows planned on 8192+2048 or 8192+4096:
    9554, 12074, 12288) and three parts on 8 warps (8192+4096+2048, also for 12345's 8192+4096+1024); never on
    windows not swept (fp16 8192+1024 on 8 warps: 9001; 8192+2048+1024 on 8 warps: 11007; 4096+2048 on 8 warps) nor
    on rows padded off the vector grid but those of 16378-16383 (below). Exponentials held in fp16 (HALF_EXPS)
    nowhere: WORDS beat them. Every realigned launch reads x as words where x's rows start on y's vector grid, but
    bf16's 32768-lane THREAD_STATS window on rows on the vector grid and bf16's three parts on 8 warps on any rows
    (words lost there); rows padded off the grid (20000 padded by 2) read elements (words lost 17-37 points there).
    Unaligned rows of up to 16384 whose span is wider (16383) take the wide realigned config, not the row kernel,
    THREAD_STATS included; so do such rows padded off the grid (16381 padded by 2), which read elements (H200: 80.5 /
    63.7% of copy bf16 / fp16 against words' 43.5 / 43.9%)."""
    for dtype, expected in ((torch.bfloat16, bf16), (torch.float16, fp16)):
        _launch, meta = softmax._plan(2048, n, stride, 2, torch.device("cpu"), dtype)  # type: ignore[misc]
        assert "WINDOW" in meta, meta
        parts = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        assert not meta.get("HALF_EXPS"), (dtype, meta)
        wordless = dtype == torch.bfloat16 and (expected == (8192, 4096, 2048) or (
            expected == (32768, 0, 0) and n % 8 == 0 and stride % 8 == 0))
        assert meta["WORDS"] == ((stride - n) % 8 == 0 and not wordless), (dtype, meta)
        if expected is None:
            assert not meta.get("THREAD_STATS"), (dtype, meta)
        else:
            assert (parts, meta["THREAD_STATS"]) == (expected, 32 * meta["num_warps"]), (dtype, meta)
            assert expected in softmax._THREAD_STATS_WINDOWS[dtype][meta["num_warps"]]


@pytest.mark.parametrize(("m", "n", "per_sm"), [
    (6000, 3333, 6), (1673, 3185, 6), (700, 4001, 6), (8192, 2731, 8), (2412, 7071, 8), (4096, 8185, 8),
    (2048, 32000, 2)])
def test_softmax_thread_stats_grid_follows_its_registers(monkeypatch: pytest.MonkeyPatch, m: int, n: int,
                                                         per_sm: int) -> None:
    """THREAD_STATS on one 4096-lane window (80 registers a thread on 4 warps) launches 6 persistent programs an SM,
    all resident, not the 8 its two-reduction config plans (two waves, 4-10 points slower on the H200); other
    windows keep their config's count; fewer rows than programs: one program a row."""
    monkeypatch.setattr(softmax, "_num_sms", lambda device: 132)
    for dtype in (torch.bfloat16, torch.float16):
        launch, meta = softmax._plan(m, n, n, 2, torch.device("cpu"), dtype)  # type: ignore[misc]
        grid = next(c.cell_contents for c in launch.__closure__ or () if isinstance(c.cell_contents, tuple))[0]
        assert grid == min(m, 132 * per_sm), (dtype, meta, grid)
        if per_sm == 6:
            assert (meta["WINDOW"], meta["PART1"], meta["PART2"], meta["THREAD_STATS"]) == (4096, 0, 0, 128), meta


@pytest.mark.parametrize(("m", "n", "per_sm"), [
    (500, 32000, 1), (625, 30804, 1), (800, 16400, 1), (900, 20001, 1), (700, 28001, 2), (1723, 25249, 2),
    (2048, 32000, 2), (264, 32000, 2), (1056, 32000, 2), (1100, 32000, 2), (1940, 12074, 2), (600, 12074, 2)])
def test_softmax_wide_windows_take_one_program_an_sm_over_few_rows(monkeypatch: pytest.MonkeyPatch, m: int, n: int,
                                                                    per_sm: int) -> None:
    """16-warp windows of 16384 lanes or more launch one persistent program an SM, not two, where two an SM would
    run at most three rounds ending in one at most half full (625 = 2 x 264 + 97), or at most two (500); two where
    the last round is fuller (700, 1723), from four rounds (1056, 1100, 2048), or within one round (264); windows
    under 16384 lanes keep two (12074 on 8192+4096)."""
    monkeypatch.setattr(softmax, "_num_sms", lambda device: 132)
    for dtype in (torch.bfloat16, torch.float16):
        launch, meta = softmax._plan(m, n, n, 2, torch.device("cpu"), dtype)  # type: ignore[misc]
        grid = next(c.cell_contents for c in launch.__closure__ or () if isinstance(c.cell_contents, tuple))[0]
        assert meta["num_warps"] == 16 and meta["THREAD_STATS"], meta
        assert grid == min(m, 132 * per_sm), (dtype, meta, grid)


@pytest.mark.parametrize("elsize", [2, 4])
def test_realigned_window_parts_cover_every_span(elsize: int) -> None:
    """For every width the realigned kernels can see (2049-32768), the parts cover the span a row can take (N + VEC
    - 1 positions when unaligned), are powers of two, largest first, at most three, no smaller than 1024 (a part
    smaller than a CTA's vectors is replicated), idle at most an eighth of the lanes or one 1024 part, and never
    more lanes than one power-of-two window; past 16384 positions, one window. rms_norm's parts follow the same
    rule for its 16-bit spans."""
    vec = 16 // elsize
    for n in range(2049, 32769):
        span = n if n % vec == 0 else n + vec - 1
        parts = softmax._parts(n, elsize)
        used = [p for p in parts if p]
        lanes = sum(parts)
        assert span <= lanes <= softmax._window(n, elsize), (n, parts)
        assert used == sorted(used, reverse=True) and all(p & (p - 1) == 0 for p in used), (n, parts)
        if span > 16384:
            assert parts == (softmax._window(n, elsize), 0, 0), (n, parts)
        else:
            assert min(used) >= 1024 and lanes - span < max(used[0] // 8, 1024), (n, parts)
        if elsize == 2 and n % 8 and n + 7 <= 16384:
            assert rms_norm._parts(n) == parts, n


@pytest.mark.parametrize(("dtype", "expected"), [(torch.bfloat16, (16, False)), (torch.float16, (16, False)),
                                                 (torch.float32, (16, True)), (None, (16, False))])
def test_realigned_softmax_config_follows_the_dtype(dtype: torch.dtype | None, expected: tuple[int, bool]) -> None:
    """The launch is picked per dtype (H200 sweep: exp2 on an FMA helps fp32 and costs 16-bit rows); no dtype means
    bf16's (or fp32's, by element size)."""
    elsize = 4 if dtype == torch.float32 else 2
    _launch, meta = softmax._plan(4096, 25249, 25249, elsize, torch.device("cpu"), dtype)  # type: ignore[misc]
    assert (meta["num_warps"], meta["FAST"]) == expected


def test_interpreted_rms_norm_never_takes_the_split_path(monkeypatch: pytest.MonkeyPatch) -> None:
    if isinstance(rms_norm._rms_norm_split, rms_norm.triton.JITFunction):
        pytest.skip("kernels are compiled in this process (GPU run): tests/gpu/test_gpu_builtin_kernels.py covers it")
    monkeypatch.setattr(rms_norm, "_num_sms", lambda device: 132)  # the looped grid's size; no CUDA here
    for n in (40000, 64803):
        plan = rms_norm._plan(64, n, n, 2, torch.device("cuda"))
        assert not isinstance(plan, rms_norm._Split | rms_norm._TwoPhase)
        assert plan[1]["CHUNK"] > 0  # the looped path


@pytest.mark.parametrize(("n", "stride", "elsize", "parts", "warps", "reread"), [
    (2047, 2047, 2, None, 0, False), (2048, 2049, 2, None, 0, False), (2049, 2049, 2, (4096, 0, 0), 4, False),
    (1027, 1027, 2, (2048, 0, 0), 2, False), (1025, 1031, 2, (2048, 0, 0), 2, False), (2041, 2041, 2, (2048, 0, 0), 2,
                                                                                          False),
    (1023, 1023, 2, None, 0, False), (2042, 2042, 2, None, 0, False),
    (4100, 4103, 2, (4096, 1024, 0), 4, False), (5999, 5999, 2, (8192, 0, 0), 4, False),
    (8185, 8185, 2, (8192, 0, 0), 4, False), (8186, 8186, 2, (8192, 1024, 0), 8, True),
    (12345, 12345, 2, (16384, 0, 0), 8, True), (16377, 16377, 2, (16384, 0, 0), 8, True),
    (2879, 2879, 2, (4096, 0, 0), 4, False), (9001, 9007, 2, (8192, 1024, 0), 8, True),
    (2879, 2879, 4, None, 0, False), (4096, 4096, 2, None, 0, False), (6000, 6000, 2, None, 0, False)])
def test_rms_norm_takes_the_realigned_kernel_on_unaligned_16_bit_rows(
        n: int, stride: int, elsize: int, parts: tuple[int, int, int] | None, warps: int, reread: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """16-bit rows of 2048-16377 whose width is not a multiple of 8 (any stride) go through the output's vector
    window, cut in power-of-two parts where that saves over a quarter of it (5999 and 12345 keep one window), 4
    warps up to 8192 lanes and 8 re-reading x beyond (H200 sweep), and so do rows of 1025-2041 (a 2048-lane window,
    on 2 warps); narrower rows, 2042-2047 (a 4096-lane window), fp32 rows and widths that are whole vectors (padded
    by an odd stride or not) keep the other paths."""
    monkeypatch.setattr(rms_norm, "_num_sms", lambda device: H200_SMS)
    plan = rms_norm._plan(1024, n, stride, elsize, torch.device("cpu"))
    meta = plan.meta if isinstance(plan, rms_norm._Split) else plan[1]
    if parts is None:
        assert "WINDOW" not in meta, meta
    else:
        assert ((meta["WINDOW"], meta["PART1"], meta["PART2"]), meta["num_warps"], meta["REREAD"]) == (
            parts, warps, reread), meta
        assert meta["ALIGN_X"] == rms_norm._align(2, stride - n)


H200_SMS, H200_SMEM_PER_SM = 132, 233472


@pytest.mark.parametrize(("m", "n", "align", "expected"), [
    # (programs per SM, warps, K, NCHUNK, NRES): two rows per SM on 8 warps where they fit the 200 KB budget, one on
    # 16 where one does, one on 32 streaming the chunks past the budget otherwise.
    (1024, 40000, 8, (2, 8, 8, 20, 20)), (1991, 33508, 4, (2, 8, 8, 17, 17)), (1024, 65536, 8, (1, 16, 8, 16, 16)),
    (800, 60000, 8, (1, 16, 8, 15, 15)), (800, 104000, 8, (1, 16, 8, 26, 26)), (600, 110000, 8, (1, 16, 8, 27, 27)),
    (1024, 131072, 8, (1, 32, 8, 16, 14)), (512, 128256, 8, (1, 32, 8, 16, 14)), (3, 65536, 2, (1, 16, 8, 16, 16))])
def test_resident_softmax_plan_by_row_size(m: int, n: int, align: int, expected: tuple[int, ...]) -> None:
    _launch, meta = softmax._resident_plan(m, n, align, 2, H200_SMS, H200_SMEM_PER_SM)  # type: ignore[misc]
    per_sm, warps, k, n_chunks, n_res = expected
    assert (meta["num_warps"], meta["K"], meta["NCHUNK"], meta["NRES"]) == (warps, k, n_chunks, n_res)
    assert meta["ALIGN"] == align and 32 * warps * k * n_chunks >= n > 32 * warps * k * (n_chunks - 1)
    # two programs per SM share the 200 KB budget; one alone may take 224 KB (a block may have 227 KB)
    assert n_res * 32 * warps * k * 2 * per_sm <= (
        softmax._RESIDENT_CAP_BYTES if per_sm == 2 else softmax._RESIDENT_SOLO_CAP_BYTES)
    # one program per SM holding whole rows: half of them start late (their stats passes would line up)
    assert meta["STAGGER"] == (softmax._RESIDENT_STAGGER if per_sm == 1 and n_res == n_chunks else 0)


@pytest.mark.parametrize("realign", [False, True])
def test_resident_rows_within_the_budget_are_held_whole(realign: bool) -> None:
    """Every 16-bit row the budget can hold keeps all its chunks in shared memory (slots are one buffer of any
    count: as two power-of-two buffers, 60000-wide rows streamed 3 of their 15 chunks, 58.6% of copy bandwidth on
    the H200), up to 224 KB where one program has the SM; wider ones stream only what does not fit, and a chunk
    larger than the budget is refused."""
    budget, solo = softmax._resident_budget(H200_SMEM_PER_SM), softmax._solo_budget(H200_SMEM_PER_SM)
    assert (budget, solo) == (200 * 1024, 224 * 1024)
    for n in range(32776, 140000, 1000):
        _launch, meta = softmax._resident_plan(64, n, 8, 2, H200_SMS, H200_SMEM_PER_SM,  # type: ignore[misc]
                                               realign=realign)
        chunk_bytes = 32 * meta["num_warps"] * meta["K"] * 2
        room = budget // 2 if meta["num_warps"] == 8 else solo
        assert meta["NRES"] == min(meta["NCHUNK"], room // chunk_bytes), n
        assert meta["NRES"] * chunk_bytes <= room
        assert (meta["num_warps"] == 32) == ((n + (7 if realign else 0)) * 2 > solo), n
    with pytest.raises(ValueError, match="does not fit"):
        softmax._resident_plan(64, 65536, 8, 2, H200_SMS, H200_SMEM_PER_SM, warps=32, k=256)


@pytest.mark.parametrize(("smem_per_sm", "block_max"), [
    (233472, 232448), (167936, 166912), (102400, 101376)])  # H100/H200, A100, sm_86/sm_89 (bytes)
def test_resident_plans_fit_a_block_on_every_topology(smem_per_sm: int, block_max: int) -> None:
    """Whatever a GPU's shared memory, a plan's slots (two programs per SM or one alone) leave room for the kernel's
    reduction scratch within the most a block may take."""
    for n in range(32776, 260000, 997):
        plan = softmax._resident_plan(64, n, 8, 2, 100, smem_per_sm)
        assert plan is not None
        meta = plan[1]
        per_sm = 2 if meta["num_warps"] == 8 else 1
        slots = meta["NRES"] * 32 * meta["num_warps"] * meta["K"] * 2
        assert per_sm * (slots + 1024) <= smem_per_sm and slots + 1024 <= block_max, (n, meta)


@pytest.mark.parametrize(("align", "smem"), [(1, H200_SMEM_PER_SM), (8, 0), (8, 48 * 1024)])
def test_resident_softmax_needs_4_byte_rows_and_shared_memory(align: int, smem: int) -> None:
    """Odd 16-bit widths or strides (cp.async copies at least 4 bytes), GPUs before sm_80 (reported as 0 bytes) and
    GPUs with little shared memory keep the register paths."""
    assert softmax._resident_plan(64, 65536, align, 2, H200_SMS, smem) is None


@pytest.mark.parametrize(("m", "n", "expected"), [
    # (programs per SM, warps, NCHUNK): the window spans n + 7 positions, so NCHUNK counts them, not n
    (1991, 33508, (2, 8, 17)), (1024, 40001, (2, 8, 20)), (1024, 65535, (1, 16, 17)), (1024, 131071, (1, 32, 17)),
    (5, 32761, (2, 8, 16))])
def test_realigned_resident_softmax_plan(m: int, n: int, expected: tuple[int, int, int]) -> None:
    """Contiguous rows off the 16-byte grid (odd widths included: 16-byte copies of the row's window, not copies of
    the row's own alignment) take the resident kernel with REALIGN; chunks cover every window position a row can
    span and the slots stay within the budget."""
    _launch, meta = softmax._resident_plan(m, n, softmax._align(2, n), 2, H200_SMS,  # type: ignore[misc]
                                           H200_SMEM_PER_SM, realign=True)
    per_sm, warps, n_chunks = expected
    chunk = 32 * warps * 8
    assert (meta["num_warps"], meta["NCHUNK"], meta["K"], meta["ALIGN"], meta["REALIGN"]) == (warps, n_chunks, 8, 1,
                                                                                              True)
    assert chunk * n_chunks >= n + 7 > chunk * (n_chunks - 1)
    assert meta["NRES"] * chunk * 2 * per_sm <= (
        softmax._RESIDENT_CAP_BYTES if per_sm == 2 else softmax._RESIDENT_SOLO_CAP_BYTES)
    assert meta["STAGGER"] == (softmax._RESIDENT_STAGGER if warps == 16 else 0)


def test_resident_keep_and_hold_options() -> None:
    """KEEP and HOLD are plan options with module defaults (both off until the H200 sweep says otherwise): KEEP only
    for 16-bit rows under CARRY (its kept exponentials are fp16, its scales CARRY's rounded maxima), asked for
    elsewhere it is refused and by default it is left out there; HOLD only where chunks are streamed."""
    def meta(n: int, **kw: object) -> dict[str, object]:
        plan = softmax._resident_plan(64, n, softmax._align(2, n), 2, H200_SMS, H200_SMEM_PER_SM, **kw)  # type: ignore[arg-type]
        assert plan is not None
        return plan[1]

    assert meta(65536)["KEEP"] is softmax._RESIDENT_KEEP and meta(65536)["HOLD"] is False
    assert meta(65536, keep=True)["KEEP"] and not meta(65536, keep=False)["KEEP"]
    assert not meta(65536, carry=False)["KEEP"]
    with pytest.raises(ValueError, match="CARRY"):
        meta(65536, carry=False, keep=True)
    with pytest.raises(ValueError, match="16-bit"):
        softmax._resident_plan(64, 65536, 1, 4, H200_SMS, H200_SMEM_PER_SM, keep=True)
    assert not meta(65536, hold=True)["HOLD"]  # every chunk resident: nothing to hold
    streamed = meta(131072, hold=True)
    assert streamed["NRES"] < streamed["NCHUNK"] and streamed["HOLD"]
    assert meta(131072)["num_warps"] == softmax._RESIDENT_STREAM_WARPS


def test_realigned_resident_chunks_leave_partial_vectors_to_the_masked_ones() -> None:
    """The REALIGN kernel masks only its first chunk and its last two (`_masked_chunk`): for every width from 32769
    up and every place a row can start inside its vector, the row's window positions fit the chunks, and every
    other chunk lies wholly inside the row (no partial vector, nothing past the row's end)."""
    for n in [*range(32769, 33000), *range(65400, 65600, 7), 98301, 131071, 250007]:
        if n % 8 == 0:
            continue
        _launch, meta = softmax._resident_plan(64, n, softmax._align(2, n), 2, H200_SMS,  # type: ignore[misc]
                                               H200_SMEM_PER_SM, realign=True)
        chunk, n_chunks = 32 * meta["num_warps"] * meta["K"], meta["NCHUNK"]
        for sh in range(8):
            assert sh + n <= n_chunks * chunk, (n, sh)
            for c in range(n_chunks):
                if not softmax._masked_chunk(c, n_chunks, True):
                    assert sh <= c * chunk and (c + 1) * chunk <= sh + n, (n, sh, c)


_COMPILE_RESIDENT = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, stride in json.loads(sys.argv[1]):
    x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
    launch, meta = softmax._resident_plan(m, n, softmax._align(2, n, stride), 2, 132, 233472)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, stride, **meta)
    out.append({"shared": kernel.metadata.shared, "copies": sorted(set(re.findall(
        r"cp\\.async\\.c[ag]\\.shared\\.global[^;]*\\], (0x[0-9a-f]+)", kernel.asm["ptx"])))})
print(json.dumps(out))
"""


def test_resident_softmax_compiles_for_sm90_within_shared_memory() -> None:
    """The Gluon kernel built for the H200's target (no GPU needed; a fresh process, in case this one interprets):
    every plan's shared memory fits a block's 227 KB, and copies are as wide as the rows' alignment allows."""
    shapes = [(1024, 65536, 65536), (512, 131072, 131072), (1991, 33508, 33508), (7, 40000, 40002)]
    done = subprocess.run([sys.executable, "-c", _COMPILE_RESIDENT, json.dumps(shapes)], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(r["shared"] <= 227 * 1024 for r in results), results
    assert [r["copies"] for r in results] == [["0x10"], ["0x10"], ["0x8"], ["0x4"]], results


_COMPILE_KEEP_HOLD = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, warps, keep, hold in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    launch, meta = softmax._resident_plan(m, n, softmax._align(2, n), 2, 132, 233472, warps=warps, keep=keep,
                                          hold=hold)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    ptx = kernel.asm["ptx"]
    out.append({"nchunk": meta["NCHUNK"], "nres": meta["NRES"], "ex2": ptx.count("ex2.approx"),
                "f16_stores": len(re.findall(r"st\\.shared[^;]*\\.v4\\.b32", ptx)),
                "loads": len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)), "local": ptx.count(".local")})
print(json.dumps(out))
"""


def test_resident_softmax_keep_and_hold_compile_for_sm90() -> None:
    """KEEP and HOLD built for the H200's target (no GPU needed): KEEP stores each resident chunk's exponentials
    (one 16-byte shared store a thread a chunk) and takes about half the exponentials of the plain kernel (one an
    element in the stats pass, one a thread a chunk in the output pass); HOLD reads each streamed chunk from global
    memory once instead of twice; none of them uses local memory (no spills) at the planned 65536 or on 16 warps at
    131072. Their speed is the sweep's (kernel_sweep.py --only softmax_resident_keep)."""
    configs = [(1024, 65536, 0, False, False), (1024, 65536, 0, True, False), (1024, 131072, 16, False, False),
               (1024, 131072, 16, False, True), (1024, 131072, 16, True, True)]
    done = subprocess.run([sys.executable, "-c", _COMPILE_KEEP_HOLD, json.dumps(configs)], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    plain, keep, streamed, hold, both = json.loads(done.stdout.strip().splitlines()[-1])
    assert plain["nres"] == plain["nchunk"] == 16 and plain["f16_stores"] == 0
    assert keep["f16_stores"] == keep["nres"], keep
    assert keep["ex2"] < 0.7 * plain["ex2"], (plain, keep)
    assert streamed["nres"] < streamed["nchunk"], streamed
    assert streamed["loads"] - hold["loads"] == streamed["nchunk"] - streamed["nres"], (streamed, hold)
    assert both["ex2"] < 0.7 * hold["ex2"], (hold, both)
    assert all(r["local"] == 0 for r in (plain, keep, streamed, hold, both)), (plain, keep, streamed, hold, both)


_PLAN_ON_H200 = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
softmax._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
softmax._smem_per_sm = lambda index: 233472
softmax._cuda_index = lambda device: 0
out = []
for m, n, stride, realign in json.loads(sys.argv[1]):
    plan = softmax._plan(m, n, stride, 2, torch.device("cuda"), torch.bfloat16, resident_realign=realign)
    if type(plan) is not tuple:
        out.append({"path": type(plan).__name__.strip("_")})
        continue
    launch, meta = plan
    x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, stride, **meta)
    ptx = kernel.asm["ptx"]
    assert ("%clock64" in ptx) == bool(meta["STAGGER"]), meta  # the stagger's spin is compiled in where planned
    out.append({"path": "resident", "realign": meta["REALIGN"], "stagger": meta["STAGGER"], "copies": sorted(set(
        re.findall(r"cp\\.async\\.c[ag]\\.shared\\.global[^;]*\\], (0x[0-9a-f]+)", ptx)))})
print(json.dumps(out))
"""


_PADDED_ON_H200 = """
import json, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
softmax._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
out = []
for m, n, stride in json.loads(sys.argv[1]):
    launch, meta = softmax._plan(m, n, stride, 2, torch.device("cuda"), torch.bfloat16)
    x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, stride, **meta)
    pf = bool(meta.get("PF_L1"))
    assert ("prefetch.global.L1" in kernel.asm["ptx"]) == pf, meta  # the prefetch is compiled in where planned
    out.append([[meta["WINDOW"], meta["PART1"], meta["PART2"]], meta["num_warps"], pf])
print(json.dumps(out))
"""


_THREAD_STATS_ON_H200 = """
import json, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
softmax._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
out = []
for m, n, dtype in json.loads(sys.argv[1]):
    dt = getattr(torch, dtype)
    launch, meta = softmax._plan(m, n, n, 2, torch.device("cuda"), dt)
    x = torch.empty((m, n), dtype=dt)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((m, n), dtype=dt), m, n, n, **meta)
    out.append([bool(meta.get("THREAD_STATS")), kernel.asm["ptx"].count("bar.sync")])
print(json.dumps(out))
"""


def test_thread_stats_plans_compile_for_sm90_with_one_reduction_a_row() -> None:
    """On the H200's topology (compiled for sm_90, a fresh process, no GPU needed): the realigned launches planned with
    THREAD_STATS compile (one row included: Triton makes M = 1 a constant) and synchronise their CTA 3 times a row,
    one reduction (fp16 on 32768 lanes and 18001 on 16384+4096 included, x read as words); the same rows in fp16
    where it keeps two reductions, 6 times or more."""
    cases = [(1, 25249, "bfloat16"), (5, 8191, "bfloat16"), (3, 3001, "bfloat16"), (7, 22001, "float16"),
             (1, 25249, "float16"), (5, 8191, "float16"), (3, 18001, "float16")]
    done = subprocess.run([sys.executable, "-c", _THREAD_STATS_ON_H200, json.dumps(cases)], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert [planned for planned, _bars in out] == [True, True, True, True, True, False, True]
    assert all(bars == 3 if planned else bars >= 6 for planned, bars in out), out


def test_padded_softmax_rows_on_an_h200_prefetch_into_l1_where_it_measured_faster() -> None:
    """On the H200's topology (compiled kernels, a fresh process, no GPU needed): 16-bit rows padded off the vector
    grid prefetch the next row into L1 (PF_L1) on windows in parts of 16385-20480 lanes (8 warps), on one
    32768-lane window (16 warps), on one 4096-lane window (4 warps), on one 8192-lane window (8001, 8 warps) and on
    8192+1024 lanes (9001, 8 warps); not at 24576 lanes, 5001, 7001 or 12001, nor on rows padded by whole vectors
    (16655 padded by 8: THREAD_STATS on 16384+4096 lanes). Under the interpreter (the other plan tests) the same rows
    never take it: its prefetch is inline PTX."""
    cases = [(1029, 16655, 16658), (1024, 20000, 20003), (700, 24001, 24002), (620, 30001, 30008),
             (4096, 3001, 3004), (8192, 2501, 2506), (4096, 5001, 5002), (2048, 9001, 9006), (1500, 12001, 12007),
             (2048, 16655, 16663), (2048, 8001, 8007), (3000, 7001, 7003)]
    done = subprocess.run([sys.executable, "-c", _PADDED_ON_H200, json.dumps(cases)], capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        [[16384, 2048, 0], 8, True], [[16384, 4096, 0], 8, True], [[16384, 8192, 0], 8, False],
        [[32768, 0, 0], 16, True], [[4096, 0, 0], 4, True], [[4096, 0, 0], 4, True], [[4096, 1024, 0], 4, False],
        [[8192, 1024, 0], 8, True], [[8192, 4096, 0], 8, False], [[16384, 4096, 0], 16, False],
        [[8192, 0, 0], 8, True], [[4096, 2048, 1024], 4, False]]


def test_softmax_plan_on_an_h200_takes_the_resident_path_through_windows_for_rows_off_the_grid() -> None:
    """On the H200's topology (compiled kernels, a fresh process, no GPU needed): contiguous 16-bit rows wider than
    32768 whose width is not a multiple of 8 take the resident kernel with REALIGN (16-byte copies, odd widths
    included); aligned rows keep it without; padded odd rows keep the split path. resident_realign=False gives the
    plan as it was before (8-byte copies at 33508, split at 40001, staged at 131071). One program per SM holding
    whole rows (65536) compiles the stagger's spin in; the others do not."""
    cases = [(1991, 33508, 33508, True), (1991, 33508, 33508, False), (1024, 40001, 40001, True),
             (1024, 40001, 40001, False), (1024, 40001, 40003, True), (1024, 65536, 65536, True),
             (64, 131071, 131071, True), (64, 131071, 131071, False)]
    done = subprocess.run([sys.executable, "-c", _PLAN_ON_H200, json.dumps(cases)], capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        {"path": "resident", "realign": True, "stagger": 0, "copies": ["0x10"]},
        {"path": "resident", "realign": False, "stagger": 0, "copies": ["0x8"]},
        {"path": "resident", "realign": True, "stagger": 0, "copies": ["0x10"]},
        {"path": "Split"}, {"path": "Split"},
        {"path": "resident", "realign": False, "stagger": softmax._RESIDENT_STAGGER, "copies": ["0x10"]},
        {"path": "resident", "realign": True, "stagger": 0, "copies": ["0x10"]},
        {"path": "Staged"}]


_RMS_SPLIT_ON_H200 = """
import json, re, sys, torch
from kernelproof_core.kernels import rms_norm
from kernelproof_core.precompile import compile_only
rms_norm._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
out = []
for m, n, stride, elsize, table in json.loads(sys.argv[1]):
    dtype = torch.bfloat16 if elsize == 2 else torch.float32
    plan = rms_norm._plan(m, n, stride, elsize, torch.device("cuda"), two_phase=False)
    assert plan.meta.get("WT", 0) == (plan.n_parts * plan.meta["CHUNK"] if plan.meta.get("REALIGN") else 0)
    if not table:  # the weight element by element, as before its shifted-copy table
        plan = plan._replace(meta={**plan.meta, "WT": 0})
    x = torch.empty((m, stride), dtype=dtype)[:, :n]
    parts = torch.empty((m, plan.n_parts), dtype=torch.float32)
    with compile_only("cuda", 90, 32):
        kernel = plan.launch(x, torch.empty(n, dtype=dtype), torch.empty((m, n), dtype=dtype), parts,
                             torch.empty(m, dtype=torch.int32), n, stride, 1e-6, plan.n_parts, **plan.meta)
    ptx = kernel.asm["ptx"]
    out.append({"realign": plan.meta.get("REALIGN", False), "parts": plan.n_parts, "chunk": plan.meta["CHUNK"],
                "vec_loads": len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)),
                "vec_stores": len(re.findall(r"st\\.global[^;]*\\.v4", ptx)), "local": ptx.count(".local")})
print(json.dumps(out))
"""


def test_wide_16_bit_rms_norm_rows_off_the_grid_split_through_vector_windows() -> None:
    """On the H200's topology (compiled for sm_90, a fresh process, no GPU needed): 16-bit rows too wide for one
    program whose width or stride is not a multiple of 8 take the split path through their vector windows (4096
    window positions a program, n + 7 positions a row): output stores 16 bytes wide (4 a thread on 4 warps), x read
    16 bytes wide where its padding is whole vectors and element by element where not (the weight too, at p - shift,
    unless the width is a multiple of 8: 40000 wide padded by 3 reads x element by element and the weight 16 bytes
    wide); aligned rows load x and the weight 16 bytes wide (8192 a program); fp32 rows stay as they were; with the
    weight's shifted-copy table (WT, planned) the weight too is read 16 bytes wide. Nothing in local memory. Numbers on
    the GPU: kernel_sweep.py --only rms_norm_split_window. (The plan takes the two-phase path where such rows are
    32769 wide or more: the split is checked as the plan makes it without.)"""
    cases = [(425, 52717, 52717, 2, 0), (7, 40001, 40006, 2, 0), (7, 40001, 40009, 2, 0), (1024, 65536, 65536, 2, 0),
             (7, 40000, 40003, 2, 0), (64, 40001, 40001, 4, 0), (425, 52717, 52717, 2, 1), (7, 40001, 40006, 2, 1)]
    done = subprocess.run([sys.executable, "-c", _RMS_SPLIT_ON_H200, json.dumps(cases)], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(r["realign"], r["parts"], r["chunk"]) for r in got] == [
        (True, 13, 4096), (True, 10, 4096), (True, 10, 4096), (False, 8, 8192), (True, 10, 4096), (False, 10, 4096),
        (True, 13, 4096), (True, 10, 4096)]
    assert [(r["vec_loads"], r["vec_stores"]) for r in got[:5] + got[6:]] == [
        (4, 4), (0, 4), (4, 4), (16, 8), (4, 4), (8, 4), (4, 4)], got
    assert all(r["local"] == 0 for r in got), got


_RMS_TWO_PHASE_ON_H200 = """
import json, re, sys, torch
from kernelproof_core.kernels import rms_norm
from kernelproof_core.precompile import compile_only
rms_norm._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
out = []
for m, n, stride in json.loads(sys.argv[1]):
    plan = rms_norm._plan(m, n, stride, 2, torch.device("cuda"))
    row = {"plan": type(plan).__name__}
    if isinstance(plan, rms_norm._TwoPhase):
        assert plan.rows_b == 0  # set at launch: one round of programs
        rows = rms_norm._two_phase_rows(m, plan.n_parts, min(plan.per_sm * 132, m * plan.n_parts))
        x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
        with compile_only("cuda", 90, 32):
            kernel = rms_norm._rms_norm_two_phase[(1,)](
                x, torch.empty((8, plan.meta["WT"]), dtype=torch.bfloat16), torch.empty((m, n), dtype=torch.bfloat16),
                torch.empty((m, plan.n_parts), dtype=torch.float32), torch.empty(m, dtype=torch.int32), m, n,
                stride, 1e-6, plan.n_parts, rows, **plan.meta)
        ptx = kernel.asm["ptx"]
        row.update(parts=plan.n_parts, rows_b=rows, chunk=plan.meta["CHUNK"], warps=plan.meta["num_warps"],
                   per_sm=plan.per_sm, vec_loads=len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)),
                   cs_stores=len(re.findall(r"st\\.global\\.cs[^;]*\\.v4", ptx)), local=ptx.count(".local"))
    out.append(row)
print(json.dumps(out))
"""


def test_wide_16_bit_rms_norm_rows_off_the_grid_take_the_two_phase_path() -> None:
    """On the H200's topology (compiled for sm_90, a fresh process, no GPU needed): 16-bit rows off the 16-byte grid
    (width or stride not a multiple of 8) 24577 wide or more, whatever the size of x, take the two-phase path: 4096
    window positions a chunk (n + 7 positions a row) on 4 warps, 8 programs an SM asked for, batches of as many whole
    rows as one chunk a program covers (66 rows of 16 chunks on 1056 programs; at least one, at most all); x read 16
    bytes wide where its padding is whole vectors (element by element where not), the table's weight 16 bytes wide,
    y stored 16 bytes wide with .cs (so the stores do not push x out of L2 before its second read); nothing in local
    memory. Narrower rows (24569, 20001: at most 6 chunks; the split was ahead at 16393) and aligned rows (65536
    wide, padded by 0 or 8) take the split."""
    cases = [(345, 64803, 64803), (289, 65494, 65494), (7, 50000, 50003), (3, 49153, 49153), (1, 600001, 600001),
             (3, 40001, 40001), (500, 33001, 33001), (4096, 52717, 52717), (3, 24577, 24577),
             (512, 65536, 65536), (1024, 65536, 65544), (9, 24569, 24569), (2048, 20001, 20001)]
    done = subprocess.run([sys.executable, "-c", _RMS_TWO_PHASE_ON_H200, json.dumps(cases)], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["plan"] for r in got] == ["_TwoPhase"] * 9 + ["_Split"] * 4, got
    assert [(r["parts"], r["rows_b"], r["chunk"], r["warps"], r["per_sm"]) for r in got[:9]] == [
        (16, 66, 4096, 4, 8), (16, 66, 4096, 4, 8), (13, 7, 4096, 4, 8), (13, 3, 4096, 4, 8), (147, 1, 4096, 4, 8),
        (10, 3, 4096, 4, 8), (9, 117, 4096, 4, 8), (13, 81, 4096, 4, 8), (7, 3, 4096, 4, 8)]
    assert [(r["vec_loads"], r["cs_stores"]) for r in got[:9]] == [(16, 4), (16, 4), (4, 4)] + [(16, 4)] * 6, got
    assert all(r["local"] == 0 for r in got[:9]), got


@pytest.mark.parametrize(("m", "n_parts", "programs", "rows"), [
    (600, 13, 1056, 81), (289, 16, 1056, 66), (7, 13, 91, 7), (1, 147, 147, 1), (4096, 10, 1056, 105),
    (3, 2000, 1056, 1), (3, 200, 1056, 3), (2000, 1, 1056, 1056)])
def test_two_phase_batches_take_one_round_of_programs(m: int, n_parts: int, programs: int, rows: int) -> None:
    """A two-phase batch is as many whole rows as one chunk a program covers: 600 x 50001 (13 chunks a row) in 8 MB
    batches had 83 rows, 1079 chunks for 1056 programs, and a second round per batch in which 23 programs worked
    (46.3% of copy against the split's 56.6% on the H200); 81 rows are 1053 chunks. Rows wider than the programs
    still make a batch of one."""
    assert rms_norm._two_phase_rows(m, n_parts, programs) == rows
    assert rows * n_parts <= programs or rows == 1


@pytest.mark.parametrize(("m", "n", "stride", "expected"), [
    (4096, 127, 127, (4, 128, 1)), (8192, 127, 127, (8, 128, 1)), (4096, 255, 255, (4, 256, 1)),
    (4096, 200, 201, (4, 256, 1)), (100, 127, 127, (1, 128, 1)), (65536, 127, 127, (8, 128, 1)),
    (16384, 98, 98, (8, 128, 1)), (8192, 194, 194, (4, 256, 1)), (4096, 126, 128, (4, 128, 1)),
    (16384, 100, 100, (8, 128, 4)), (32768, 100, 100, (8, 128, 4)), (8192, 196, 196, (4, 256, 4)),
    (16384, 60, 60, (16, 64, 4)), (32768, 62, 62, (16, 64, 4)), (1000, 100, 100, (2, 128, 4)),
    (4096, 1, 1, (8, 1, 4)), (65536, 128, 128, (64, 128, 8)), (65536, 30, 30, (128, 32, 4))])
def test_short_softmax_rows_take_small_programs(m: int, n: int, stride: int, expected: tuple[int, int, int]) -> None:
    """16-bit rows padded to 128-256 lanes whose accesses are scalar or 4 bytes wide run one warp a program, at most
    1024 elements (no 256-element threads at 65536 x 127), about six programs an SM (H200: 4096 x 127 2.52 us against
    3.25 on 4 warps, eager 3.02); rows of 8-byte accesses padded to 64-256 lanes, and of 4-byte accesses padded to
    64, run 1024-lane tiles on 4 warps (16384 x 100 3.69 us against 5.04 on 8192-lane tiles); aligned rows and rows
    narrower than 64 keep the tile rule."""
    _launch, meta = softmax._plan(m, n, stride, 2, torch.device("cpu"), torch.bfloat16)  # type: ignore[misc]
    assert (meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"]) == expected, meta


@pytest.mark.parametrize(("m", "n", "stride", "expected"), [
    (4096, 127, 127, (8, 128, 1)), (8192, 127, 127, (8, 128, 1)), (4096, 255, 255, (4, 256, 1)),
    (16384, 100, 100, (16, 128, 4)), (4096, 1000, 1000, (4, 1024, 8)), (8192, 196, 196, (8, 256, 4)),
    (2048, 500, 500, (4, 512, 8)), (4096, 1000, 1024, (4, 1024, 8)), (64, 200, 200, (1, 256, 4))])
def test_short_16_bit_rms_norm_rows_reread_small_tiles(m: int, n: int, stride: int,
                                                       expected: tuple[int, int, int],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """16-bit rows padded to 128-1024 lanes re-read x for the scaling pass: odd widths (scalar accesses) up to 256
    lanes on one warp and 1024-element tiles, vectorised rows on 2048-element tiles (up to 256 lanes) or 4096 at 16
    elements a thread, halved until the grid has two programs an SM (H200: 4096 x 127 2.23 us against 2.9 on
    8192-element tiles held across the reduction; 4096 x 1000 4.62 against 5.8, torch.compile 5.2). fp32 rows, rows
    narrower than 128 lanes, scalar rows of 512 lanes and 1024-wide rows (the re-read plan) keep their plans."""
    monkeypatch.setattr(rms_norm, "_num_sms", lambda device: H200_SMS)
    _launch, meta = rms_norm._plan(m, n, stride, 2, torch.device("cpu"))  # type: ignore[misc]
    assert (meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"]) == expected, meta
    assert meta["REREAD"] and meta["EVEN"] == (n == meta["BLOCK_N"] and m % meta["BLOCK_M"] == 0)
    for width, elsize in ((127, 4), (60, 2), (333, 2)):  # fp32, 64 lanes, 512 scalar lanes: the tile rule
        _launch, meta = rms_norm._plan(4096, width, width, elsize, torch.device("cpu"))  # type: ignore[misc]
        assert not meta.get("REREAD") and meta["BLOCK_M"] * meta["BLOCK_N"] >= 512, (width, elsize, meta)
