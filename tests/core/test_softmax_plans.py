"""Launch plans of the built-in softmax that must hold on any host: which row path (row kernel, realigned window and
its parts, one reduction a row, split, staged) runs at which width, alignment and dtype.

The split paths make a row's programs wait for each other, which only works when they run at the same time: on a
GPU, compiled. The interpreter runs programs one after another, so they must never be chosen there, whatever device
the tensors claim. Tests named "on an h200" compile for sm_90 in a fresh process with the H200's topology patched in
(no GPU needed).
"""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import rms_norm, softmax
from tests.sm90_build import compile_for_sm90


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
        assert isinstance(launch, softmax._Persistent), launch
        grid = launch.programs
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
        assert isinstance(launch, softmax._Persistent), launch
        grid = launch.programs
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


_PLANNED_ON_H200 = """
import json, os, subprocess, sys, tempfile, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import _cuobjdump
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
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(kernel.asm["cubin"])
    usage = subprocess.run([_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    regs = int(next(w for w in usage.split() if w.startswith("REG:"))[4:])
    out.append({"thread_stats": bool(meta.get("THREAD_STATS")), "bars": kernel.asm["ptx"].count("bar.sync"),
                "per_sm": launch.programs // 132, "regs": regs,
                "held": softmax._resident_per_sm(regs, int(kernel.metadata.shared), meta["num_warps"])})
print(json.dumps(out))
"""


_FMA_EXP_ON_H200 = """
import json, os, subprocess, sys, tempfile, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import _cuobjdump, common_path_opcodes, opcodes
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
softmax._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
softmax._FMA_EXP = True  # the experiment, planned as it would be
out = []
for m, n, pad, dtype in json.loads(sys.argv[1]):
    dt = getattr(torch, dtype)
    launch, meta = softmax._plan(m, n, n + pad, 2, torch.device("cuda"), dt)
    x = torch.empty((m, n + pad), dtype=dt)[:, :n]
    found = {"planned": bool(meta.get("FMA_EXP")), "thread_stats": bool(meta.get("THREAD_STATS"))}
    for fma in (True, False):
        with compile_only("cuda", 90, 32):
            kernel = launch(x, torch.empty((m, n), dtype=dt), m, n, n + pad, **{**meta, "FMA_EXP": fma})
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(kernel.asm["cubin"])
        usage = subprocess.run([_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True).stdout.split()
        os.unlink(f.name)
        # with FMA_EXP, what an ordinary program runs: its rare second look follows the loop (_rows_again)
        ops = common_path_opcodes(kernel.asm["cubin"], "536870912") if fma else opcodes(kernel.asm["cubin"])
        found[str(fma)] = {"instructions": sum(ops.values()), "ffma": ops["FFMA"], "fmul": ops["FMUL"],
                           "mufu": ops["MUFU"], "regs": int(next(w for w in usage if w.startswith("REG:"))[4:]),
                           "local": int(next(w for w in usage if w.startswith("LOCAL:"))[6:]),
                           "mul_rp": kernel.asm["ptx"].count("mul.rp.f32")}
    out.append(found)
print(json.dumps(out))
"""


def test_fma_exp_plans_compile_for_sm90_with_one_instruction_an_exponent_fewer() -> None:
    """On the H200's topology (compiled for sm_90, no GPU needed): with _FMA_EXP on (an experiment, off by default),
    16-bit realigned launches are planned with it, THREAD_STATS windows (bf16 1723 x 25249), windows without it (fp16
    2770 x 7294) and rows padded off the grid (bf16 1322 x 23450 + 1) alike, and their builds take each exponent as
    one fused multiply-add against the max times log2 e rounded once, up (mul.rp, never fused into the exponents): fewer
    instructions on an ordinary program's path (the second look for rows whose max reaches _CARRY_MAX follows the
    loop) than the same launch without it, an FMUL an element fewer, no register more than one, nothing spilled."""
    out = compile_for_sm90(_FMA_EXP_ON_H200, [(1723, 25249, 0, "bfloat16"), (2770, 7294, 0, "float16"),
                                              (1322, 23450, 1, "bfloat16")])
    assert [(r["planned"], r["thread_stats"]) for r in out] == [(True, True), (True, False), (True, False)], out
    for r in out:
        fused, plain = r["True"], r["False"]
        assert fused["mul_rp"] >= 1 and plain["mul_rp"] == 0, r
        assert fused["instructions"] < 0.97 * plain["instructions"], r
        assert plain["fmul"] - fused["fmul"] >= fused["mufu"] - 16 and fused["ffma"] >= fused["mufu"] - 16, r
        assert fused["regs"] <= plain["regs"] + 1 and fused["local"] == plain["local"] == 0, r


def test_thread_stats_plans_compile_for_sm90_with_one_reduction_a_row() -> None:
    """On the H200's topology (compiled for sm_90, a fresh process, no GPU needed): the realigned launches planned with
    THREAD_STATS compile (one row included: Triton makes M = 1 a constant) and synchronise their CTA 3 times a row,
    one reduction (fp16 on 32768 lanes and 18001 on 16384+4096 included, x read as words); the same rows in fp16
    where it keeps two reductions, 6 times or more."""
    cases = [(1, 25249, "bfloat16"), (5, 8191, "bfloat16"), (3, 3001, "bfloat16"), (7, 22001, "float16"),
             (1, 25249, "float16"), (5, 8191, "float16"), (3, 18001, "float16")]
    out = compile_for_sm90(_PLANNED_ON_H200, cases)
    assert [r["thread_stats"] for r in out] == [True, True, True, True, True, False, True]
    assert all(r["bars"] == 3 if r["thread_stats"] else r["bars"] >= 6 for r in out), out


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
    results = compile_for_sm90(_PADDED_ON_H200, cases)
    assert results == [
        [[16384, 2048, 0], 8, True], [[16384, 4096, 0], 8, True], [[16384, 8192, 0], 8, False],
        [[32768, 0, 0], 16, True], [[4096, 0, 0], 4, True], [[4096, 0, 0], 4, True], [[4096, 1024, 0], 4, False],
        [[8192, 1024, 0], 8, True], [[8192, 4096, 0], 8, False], [[16384, 4096, 0], 16, False],
        [[8192, 0, 0], 8, True], [[4096, 2048, 1024], 4, False]]


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


_COMPILE_PDL = r"""
import json, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only

softmax._num_sms = lambda device: 132  # the H200's topology; no GPU here
softmax._smem_per_sm = lambda index: 233472
softmax._dependent_launch = lambda device: True  # an sm_90 GPU, compiled
out = []
for pdl, m, n in json.loads(sys.argv[1]):
    softmax._PDL = pdl
    launch, meta = softmax._plan(m, n, n, 2, torch.device("cuda", 0), torch.bfloat16)
    x = torch.empty((m, n), dtype=torch.bfloat16)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    body = kernel.asm["ptx"][kernel.asm["ptx"].index(".entry"):]
    out.append({"kernel": kernel.name, "meta": {k: v for k, v in meta.items() if k in ("PDL", "launch_pdl")},
                "launch_pdl": bool(kernel.metadata.launch_pdl),
                "release": body.find("griddepcontrol.launch_dependents"), "wait": body.find("griddepcontrol.wait"),
                "first_load": min(i for i in (body.find("ld.global"), body.find("cp.async")) if i >= 0)})
print(json.dumps(out))
"""


def test_softmax_pdl_switch_on_an_h200_takes_the_row_and_realigned_kernels_only() -> None:
    """_PDL: the row kernel (8192 wide) and the realigned one (32768, 2770 x 7294) are launched with launch_pdl and
    wait before their first load; the resident kernel (65536) never takes it; under 8 MB (64 x 8192) or with the
    switch off, no grid-dependency instruction at all."""
    cases = [(True, 8192, 8192), (True, 2048, 32768), (True, 2770, 7294), (True, 1024, 65536), (False, 2048, 32768),
             (True, 64, 8192)]
    rows, realigned, mid, resident, off, small = compile_for_sm90(_COMPILE_PDL, cases)
    assert small["meta"] == {} and small["release"] == small["wait"] == -1, small
    assert rows["kernel"] == "_softmax_rows" and realigned["kernel"] == mid["kernel"] == "_softmax_realigned"
    for built in (rows, realigned, mid):
        assert built["meta"] == {"PDL": True, "launch_pdl": True} and built["launch_pdl"], built
        assert 0 <= built["release"] < built["wait"] < built["first_load"], built
    assert resident["kernel"] == "_softmax_resident" and resident["meta"] == {} and resident["wait"] == -1
    assert off["meta"] == {} and not off["launch_pdl"] and off["release"] == off["wait"] == -1, off


def test_persistent_launches_cap_their_grid_at_what_their_build_holds() -> None:
    """Persistent register-kernel builds and the programs an SM they hold (built for sm_90 on the H200's topology,
    registers from cuobjdump): fp16 rows of 3001 on windows on lines (2048+1024 lanes, 4 warps) capped at 64
    registers (_LINE_MAXNREG; 67 uncapped: 7 held of the 8 planned), so all 8 are held, as for bf16 (63 capped); bf16
    rows of 7294 (THREAD_STATS' 8192-lane window on 8 warps, 80 registers) hold 3 of 8, fp16 rows of
    4500 (4096+1024 lanes, 4 warps, 96) 5 of 8. _Persistent launches the first call as planned and
    later ones, where the plan's count is not a whole number of what its build holds, on what it holds (learned from
    the launch: the GPU test checks it)."""
    out = compile_for_sm90(_PLANNED_ON_H200, [(8192, 3001, "float16"), (2770, 7294, "bfloat16"),
                                             (8192, 3001, "bfloat16"), (4096, 4500, "float16")])
    assert [[r["per_sm"], r["regs"], r["held"]] for r in out] == [[8, 64, 8], [8, 80, 3], [8, 63, 8], [8, 96, 5]], out
    assert softmax._resident_per_sm(128, 0, 16) == 1 and softmax._resident_per_sm(64, 0, 16) == 2
    assert softmax._resident_per_sm(40, 64 * 1024, 4) == 3  # shared memory: 228 KB holds three 64 KB programs
    assert softmax._resident_per_sm(32, 0, 4) == 16  # 2048 threads an SM


@pytest.mark.parametrize(("m", "n", "dtype"), [(9, 3001, torch.float16), (7, 7294, torch.bfloat16),
                                               (5, 2049, torch.float16)])
def test_persistent_softmax_rows_are_the_same_bits_on_any_grid(monkeypatch: pytest.MonkeyPatch, m: int, n: int,
                                                               dtype: torch.dtype) -> None:
    """The capped grid must not change a row's bits (the replay gate compares the first call, on the plan's grid, with
    later ones, on what the SMs hold): the planned realigned launch (windows on lines, fp16 two reductions, bf16
    THREAD_STATS) run on 1, 2, 3 and m programs writes the same bytes, within fp32's rounding of softmax. On the CPU
    (interpreted): a launch learns nothing there, so _Persistent runs the plan's grid."""
    monkeypatch.setattr(softmax, "_num_sms", lambda device: 132)
    x = (torch.randn(m, n) * 4).to(dtype)
    x[0, ::7] = float("-inf")
    launch, meta = softmax._plan(m, n, n, 2, x.device, dtype)  # type: ignore[misc]
    assert isinstance(launch, softmax._Persistent) and launch.programs == m and "WINDOW" in meta, meta
    outs = []
    for grid in (1, 2, 3, m):
        y = torch.full_like(x, float("nan"))
        launch.kernel[(grid,)](x, y, m, n, n, **meta)
        outs.append(y)
    torch.testing.assert_close(outs[0].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert all(torch.equal(out, outs[0]) for out in outs[1:])
    y = torch.empty_like(x)
    launch(x, y, m, n, n, **meta)
    assert torch.equal(y, outs[0]) and launch.grid(x, **meta) == m and not any(
        key[0] == launch.kernel.fn.__name__ and key[2] == dtype and key[3] == x.device for key in softmax._RESIDENT)
