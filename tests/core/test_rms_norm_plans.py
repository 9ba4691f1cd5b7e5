"""Launch plans of the built-in rms_norm that must hold on any host: the realigned kernel for unaligned 16-bit
rows, the resident, split and two-phase paths for wide rows (compiled for sm_90 in a fresh process with the H200's
topology, no GPU needed), never a split under the interpreter, and short rows' tiles.
"""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import rms_norm
from tests.core.h200_topology import H200_SMEM_PER_SM, H200_SMS
from tests.sm90_build import compile_for_sm90


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


_RMS_SPLIT_ON_H200 = """
import json, re, sys, torch
from kernelproof_core.kernels import rms_norm
from kernelproof_core.precompile import compile_only
rms_norm._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
out = []
for m, n, stride, elsize, table in json.loads(sys.argv[1]):
    dtype = torch.bfloat16 if elsize == 2 else torch.float32
    plan = rms_norm._plan(m, n, stride, elsize, torch.device("cuda"), two_phase=False, resident=False)
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
    got = compile_for_sm90(_RMS_SPLIT_ON_H200, cases)
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
    plan = rms_norm._plan(m, n, stride, 2, torch.device("cuda"), resident=False)  # the resident path has its own test
    row = {"n": n, "plan": type(plan).__name__}
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
    got = compile_for_sm90(_RMS_TWO_PHASE_ON_H200, cases)
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


_COMPILE_PDL = r"""
import json, sys, torch
from kernelproof_core.kernels import rms_norm
from kernelproof_core.precompile import compile_only

rms_norm._num_sms = lambda device: 132  # the H200's topology; no GPU here
rms_norm._dependent_launch = lambda device: True  # an sm_90 GPU, compiled
out = []
for pdl, m, n in json.loads(sys.argv[1]):
    rms_norm._PDL = pdl
    plan = rms_norm._plan(m, n, n, 2, torch.device("cuda"))
    launch, meta = plan
    x = torch.empty((m, n), dtype=torch.bfloat16)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty(n, dtype=torch.bfloat16), x, m, n, n, 1e-6, **meta)
    body = kernel.asm["ptx"][kernel.asm["ptx"].index(".entry"):]
    out.append({"kernel": kernel.name, "meta": {k: v for k, v in meta.items() if k in ("PDL", "launch_pdl")},
                "launch_pdl": bool(kernel.metadata.launch_pdl),
                "release": body.find("griddepcontrol.launch_dependents"), "wait": body.find("griddepcontrol.wait"),
                "first_load": body.find("ld.global")})
print(json.dumps(out))
"""


def test_rms_norm_row_kernel_takes_dependent_launch_only_when_asked() -> None:
    """_PDL: the row kernel's plans of 8 MB or more (gpt_oss_2880 re-read, the narrow tile of 4096 x 1024, short rows
    of 32768 x 127) are launched with launch_pdl and wait before their first load; under 8 MB (4096 x 127) or with
    the switch off, no grid-dependency instruction at all. Other kernels (the realigned one at 2879 wide) never take
    it. Built for sm_90 without a GPU."""
    cases = [(True, 8192, 2880), (True, 32768, 127), (True, 4096, 1024), (False, 8192, 2880), (True, 8192, 2879),
             (True, 4096, 127)]
    on_reread, on_short, on_tile, off, realigned, small = compile_for_sm90(_COMPILE_PDL, cases)
    for built in (on_reread, on_short, on_tile):
        assert built["kernel"] == "_rms_norm_rows" and built["meta"] == {"PDL": True, "launch_pdl": True}, built
        assert built["launch_pdl"] and 0 <= built["release"] < built["wait"] < built["first_load"], built
    for plain in (off, small):
        assert plain["kernel"] == "_rms_norm_rows" and plain["meta"] == {} and not plain["launch_pdl"], plain
        assert plain["release"] == plain["wait"] == -1, plain
    assert realigned["kernel"] == "_rms_norm_realigned" and realigned["meta"] == {} and realigned["wait"] == -1


_COMPILE_TABLE_PDL = r"""
import json, sys, torch
from kernelproof_core.kernels import rms_norm
from kernelproof_core.precompile import compile_only

rms_norm._num_sms = lambda device: 132  # the H200's topology; no GPU here
rms_norm._smem_per_sm = lambda device: 233472
rms_norm._dependent_launch = lambda device: True  # an sm_90 GPU, compiled
out = []
for on, m, n in json.loads(sys.argv[1]):
    rms_norm._RESIDENT_TABLE_PDL = on
    launch, meta = rms_norm._plan(m, n, n, 2, torch.device("cuda"))
    x = torch.empty((m, n), dtype=torch.bfloat16)
    wt = meta.get("WT", 0)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((8, wt) if wt else (n,), dtype=torch.bfloat16), x, m, n, n, 1e-6, **meta)
        table = rms_norm._rms_norm_weight_table[(8, 1)](x, x, n, x, 0, WT=max(wt, 8), BLOCK=2048,
                                                        RELEASE=bool(meta.get("PDL")), num_warps=4)
    body = kernel.asm["ptx"][kernel.asm["ptx"].index(".entry"):]
    wait = body.find("griddepcontrol.wait")
    tbody = table.asm["ptx"][table.asm["ptx"].index(".entry"):]
    out.append({"kernel": kernel.name, "pdl": meta.get("PDL", False), "launch_pdl": bool(kernel.metadata.launch_pdl),
                "nchunk": meta.get("NCHUNK", 0), "wait": wait, "first_load": body.find("ld.global"),
                "copies_before_wait": body[:wait].count("cp.async.cg") if wait >= 0 else -1,
                "release": tbody.find("griddepcontrol.launch_dependents"), "table_store": tbody.find("st.global")})
print(json.dumps(out))
"""


def test_resident_rms_norm_table_pdl_waits_for_the_table_after_its_first_copies() -> None:
    """TABLE_PDL (experiment, off), built for sm_90 without a GPU: on, the resident launch through windows (372 x
    46501, 1024 x 49145) is launched with launch_pdl, issues its first row's copies (one a chunk) and then waits for
    the grid before it (griddepcontrol.wait) ahead of every global load (the weight table's, the edge vectors'),
    and the table kernel releases it before its first store; off, or on aligned rows (no table: 1024 x 65536),
    neither instruction is there."""
    cases = [(True, 372, 46501), (True, 1024, 49145), (False, 372, 46501), (True, 1024, 65536)]
    on, on_pair, off, aligned = compile_for_sm90(_COMPILE_TABLE_PDL, cases)
    for built in (on, on_pair):
        assert built["kernel"] == "_rms_norm_resident" and built["pdl"] and built["launch_pdl"], built
        assert built["copies_before_wait"] == built["nchunk"] and 0 <= built["wait"] < built["first_load"], built
        assert 0 <= built["release"] < built["table_store"], built
    for plain in (off, aligned):
        assert plain["kernel"] == "_rms_norm_resident" and not plain["pdl"] and not plain["launch_pdl"], plain
        assert plain["wait"] == -1 and plain["release"] == -1, plain


_RMS_RESIDENT_ON_H200 = """
import json, re, subprocess, sys, tempfile, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import _cuobjdump, opcodes
from kernelproof_core.kernels import rms_norm
from kernelproof_core.precompile import compile_only
rms_norm._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
rms_norm._smem_per_sm = lambda device: 233472
out = []
line0 = rms_norm._RESIDENT_LINE
ring_aligned0 = rms_norm._RESIDENT_RING_ALIGNED
for m, n, stride, *opts in json.loads(sys.argv[1]):  # opts: LINE, WSMEM, WSHIFT, RING, RING_ALIGNED, WIDEN
    rms_norm._RESIDENT_LINE = opts[0] if opts else line0
    rms_norm._RESIDENT_WSMEM = bool(opts[1]) if len(opts) > 1 else False
    rms_norm._RESIDENT_WSHIFT = bool(opts[2]) if len(opts) > 2 else False
    rms_norm._RESIDENT_RING = bool(opts[3]) if len(opts) > 3 else False
    rms_norm._RESIDENT_RING_ALIGNED = bool(opts[4]) if len(opts) > 4 else ring_aligned0
    rms_norm._RESIDENT_WIDEN = bool(opts[5]) if len(opts) > 5 else False
    plan = rms_norm._plan(m, n, stride, 2, torch.device("cuda"))
    row = {"n": n, "plan": type(plan).__name__ if not isinstance(plan, tuple) or hasattr(plan, "_fields") else "launch"}
    if row["plan"] == "launch":
        launch, meta = plan
        x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
        w = torch.empty((8, meta["WT"]) if meta.get("WT") else (n,), dtype=torch.bfloat16)
        with compile_only("cuda", 90, 32):
            kernel = launch(x, w, torch.empty((m, n), dtype=torch.bfloat16), m, n, stride, 1e-6, **meta)
        ptx, ops = kernel.asm["ptx"], opcodes(kernel.asm["cubin"])
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            usage = subprocess.run([_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True).stdout
        regs = int(re.search(r"REG:(\\d+)", usage).group(1))
        row.update(kernel=kernel.name, meta=meta, bar=ops["BAR"], regs=regs, copies=ops["LDGSTS"],
                   instructions=sum(ops.values()), prmt=ops["PRMT"],
                   local=ptx.count(".local"), vec_loads=len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)),
                   vec_stores=len(re.findall(r"st\\.global[^;]*\\.v4", ptx)),
                   smem_stores=len(re.findall(r"st\\.shared[^;]*\\.v4", ptx)), shifts=ptx.count("shf.r.clamp.b32"),
                   offsets=sorted({int(v) for v in re.findall(r"global_smem\\+(\\d+)", ptx)}),
                   base=len(re.findall(r"mov\\.u32 \\S+, global_smem;", ptx)))
    out.append(row)
print(json.dumps(out))
"""


def test_wide_16_bit_rms_norm_rows_that_fill_their_last_round_take_the_resident_path() -> None:
    """On the H200's topology (compiled for sm_90, a fresh process, no GPU needed): 16-bit rows wider than 32768, on
    the 16-byte grid (any stride of whole vectors) or contiguous off it (REALIGN, through the shifted weight table;
    from 20001 wide, _RESIDENT_WINDOWS_MIN_N: 32083, 24577, 20001 here), take the resident path where the rows fill
    at least 85% of their last round: two 16-warp programs an SM where two whole rows fit 200 KB (40000 wide, 32769,
    45001, 49145 and the three narrower ones through windows: 4096-element chunks; registers capped at 64 where the
    windows' build would take more), else one 32-warp program an SM where a whole row fits 224 KB: 476 rows (4
    rounds of 132, the last 0.90 full), 345 (0.87), 1024, 120 (one round, 0.91), 100003 wide (13 chunks of 8192, 208
    KB). 400 rows of 40000 fill 0.76 of 528 programs and 0.76 of 528 SMs' rounds: the two-phase path. It stays on
    the two-phase path at 270 rows (0.68 full), 425 (0.80) and 300 rows of 28001 (0.57 of two an SM's round), for
    padded rows off the grid (the window needs a contiguous row), for a row past 114688 (14 chunks over the 224 KB
    budget) and at 32768 wide (the fused row kernel). Built: one 16-byte cp.async a thread a chunk twice a row (the
    prologue's and the refill's), the weight read and y written 16 bytes wide, nothing in local memory, no CTA
    barrier but the row's reductions (the copies' waits carry none; WSMEM, planned on aligned rows whose weight does
    not all fit, adds one before each staged chunk, once), and the slots, addressed from global_smem + 0, below
    every other shared access."""
    cases = [(476, 63343, 63343, 1), (345, 64803, 64803, 1), (1024, 65536, 65536, 1), (1024, 40000, 40008, 2),
             (120, 100003, 100003, 1), (2000, 60001, 60001, 1), (1024, 32769, 32769, 2), (250, 45001, 45001, 2),
             (1024, 49145, 49145, 2), (510, 32083, 32083, 2), (1024, 24577, 24577, 2), (1024, 20001, 20001, 2),
             (270, 63553, 63553, 0), (300, 28001, 28001, 0), (425, 52717, 52717, 0), (476, 63343, 63350, 0),
             (512, 114689, 114689, 0), (400, 40001, 40001, 0), (1024, 32768, 32768, -1)]
    got = compile_for_sm90(_RMS_RESIDENT_ON_H200, [c[:3] for c in cases])
    assert [r["plan"] for r in got] == [{0: "_TwoPhase"}.get(c[3], "launch") for c in cases], got
    assert got[-1]["kernel"] == "_rms_norm_rows", got
    for (_m, n, _stride, per_sm), r in zip(cases, got, strict=True):
        if per_sm <= 0:
            continue
        meta = r["meta"]
        realign = n % 8 != 0
        span = n + 7 if realign else n
        warps = 16 if per_sm == 2 else 32
        assert r["kernel"] == "_rms_norm_resident" and meta["num_warps"] == warps and meta["REALIGN"] == realign, r
        chunk = 32 * warps * 8
        assert meta["NCHUNK"] == -(-span // chunk) and meta["WT"] == (chunk * meta["NCHUNK"] if realign else 0), r
        assert meta["NCHUNK"] * chunk * 2 * per_sm <= (200 if per_sm == 2 else 224) * 1024, r
        assert meta["STAGGER"] == (2500 if per_sm == 1 else 0), r
        assert r["copies"] == 2 * meta["NCHUNK"] and r["local"] == 0 and r["base"] == 1, r
        assert r["vec_loads"] == meta["NCHUNK"] and r["vec_stores"] == meta["NCHUNK"], r
        assert r["bar"] <= 10 + meta.get("WS", 0), r  # WSMEM: a barrier before each staged chunk, once
        assert r["regs"] * 32 * warps * per_sm <= 65536, r  # every program an SM is asked to hold fits
        assert min(r["offsets"]) >= meta["NCHUNK"] * chunk * 2, r  # the reductions' scratch sits past the slots


def test_resident_rms_norm_windows_on_lines_build_like_windows_on_vectors() -> None:
    """LINE (experiment, off: windows on 128-byte lines) built for sm_90 at the realigned resident shapes, one and two
    programs an SM: the window spans n + 63 positions (a chunk more at 45001; 49145 no longer fits two rows an SM, so
    one an SM), the shifted table covers it, and the build is the one windows on vectors make (one 16-byte copy a
    thread a chunk twice a row, 16-byte weight reads and stores, nothing in local memory, at most 10 CTA barriers,
    registers that fit the SM)."""
    cases = [(476, 63343, 63343), (2000, 60001, 60001), (1024, 49145, 49145), (250, 45001, 45001)]
    got = compile_for_sm90(_RMS_RESIDENT_ON_H200, [[*c, line] for line in (0, 64) for c in cases])
    for vectors, lines in zip(got[:len(cases)], got[len(cases):], strict=True):
        meta = lines["meta"]
        warps = meta["num_warps"]
        chunk = 32 * warps * 8
        assert meta["LINE"] == 64 and "LINE" not in vectors["meta"], (vectors, lines)
        assert meta["NCHUNK"] == -(-(int(lines["n"]) + 63) // chunk) and meta["WT"] == chunk * meta["NCHUNK"], lines
        assert lines["copies"] == 2 * meta["NCHUNK"] and lines["local"] == 0 and lines["base"] == 1, lines
        assert lines["vec_loads"] == lines["vec_stores"] == meta["NCHUNK"], lines
        assert lines["bar"] <= 10 and lines["regs"] * 32 * warps * (2 if warps == 16 else 1) <= 65536, lines
    assert [r["meta"]["num_warps"] for r in got] == [32, 32, 16, 16, 32, 32, 32, 16], got


def test_resident_rms_norm_weight_in_shared_memory_builds_past_the_slots() -> None:
    """WSMEM (the weight of a row's first WS chunks staged in shared memory once a program; asked for here wherever
    it fits, planned only on aligned rows whose weight does not all fit) built for sm_90 at aligned and windowed
    resident shapes, one and two programs an SM: WS chunks fill what the row slots leave of the program's share (224
    KB, or 100 KB each of two), through windows PERIOD 8 (odd widths); the staged weight sits past the slots (the
    copies still address the slots from global_smem + 0), one 16-byte shared store a thread a staged chunk, the
    weight still read 16 bytes wide once a chunk (staged chunks in the prologue, the rest every row; WSHIFT, where
    every chunk is staged through windows: w's two vectors a thread a chunk, no table, four funnel shifts a chunk),
    nothing in local memory, a barrier at most a staged chunk more than without (before the prologue's stores,
    outside the row loop), registers that fit."""
    cases = [(372, 46501, 46501, 0, 1), (1024, 65536, 65536, 0, 1), (1024, 40000, 40000, 0, 1),
             (512, 100003, 100003, 0, 1), (2000, 60001, 60001, 0, 1), (372, 46501, 46501, 0, 1, 1),
             (2000, 60001, 60001, 0, 1, 1)]
    got = compile_for_sm90(_RMS_RESIDENT_ON_H200, cases)
    expected = [(6, 6, 8, 32), (8, 6, 1, 32), (10, 2, 1, 16), (13, 1, 8, 32), (8, 6, 8, 32), (6, 6, 8, 32),
                (8, 6, 8, 32)]
    shifted = got[5]  # WSHIFT: no table; w's two aligned vectors a thread a chunk, once, shifted in registers
    assert shifted["meta"]["WSHIFT"] and shifted["meta"]["WT"] == 0 and "WSHIFT" not in got[6]["meta"], got[5:]
    assert shifted["vec_loads"] == 2 * shifted["meta"]["NCHUNK"] and shifted["shifts"] == 4 * shifted["meta"]["WS"]
    got[5]["vec_loads"] = shifted["meta"]["NCHUNK"]  # the checks below: as the table's build
    assert [(r["meta"]["NCHUNK"], r["meta"]["WS"], r["meta"]["PERIOD"], r["meta"]["num_warps"]) for r in got] == \
        expected, got
    for r in got:
        meta, warps = r["meta"], r["meta"]["num_warps"]
        chunk = 32 * warps * 8
        assert (meta["NCHUNK"] + meta["WS"]) * chunk * 2 <= (224 if warps == 32 else 100) * 1024, r
        assert min(r["offsets"]) >= meta["NCHUNK"] * chunk * 2 and r["base"] == 1, r  # all past the slots
        assert r["smem_stores"] == meta["WS"] and r["vec_loads"] == r["vec_stores"] == meta["NCHUNK"], r
        assert r["copies"] == 2 * meta["NCHUNK"] and r["local"] == 0, r
        assert r["bar"] <= 10 + meta["WS"] and r["regs"] * 32 * warps * (2 if warps == 16 else 1) <= 65536, r


def test_resident_rms_norm_ring_builds_a_third_copy_a_chunk_and_fits() -> None:
    """RING (two sets of row slots a program; forced here through windows, where it lost on the H100) and RING_LAZY
    as planned (aligned rows, one program an SM: 396 x 40000, 600 x 56000) built for sm_90: one 16-byte copy a thread
    a chunk three times (the prologue's, the second row's, the refill's), the copies still addressed from global_smem
    + 0 with the reductions' scratch past both sets, nothing in local memory, no more CTA barriers than without,
    registers that fit one 32-warp program; not where two sets do not fit (476 x 63343: 8 chunks of 16 KB), a weight
    is staged (1024 x 40000) or rows go through windows unasked (372 x 46501)."""
    cases = [(372, 46501, 46501, 0, 0, 0, 1), (396, 40000, 40000), (600, 56000, 56000), (476, 63343, 63343, 0, 0, 0, 1),
             (1024, 40000, 40000, 0, 1, 0, 1), (372, 46501, 46501), (396, 40000, 40000, 0, 0, 0, 0, 0),
             (600, 56000, 56000, 0, 0, 0, 0, 0)]
    got = compile_for_sm90(_RMS_RESIDENT_ON_H200, cases)
    assert [(r["meta"].get("RING", False), r["meta"].get("RING_LAZY", False)) for r in got] == [
        (True, False), (True, True), (True, True), (False, False), (False, False), (False, False), (False, False),
        (False, False)], got
    for ring, plain in zip(got[:3], got[5:], strict=True):
        meta = ring["meta"]
        chunk = 32 * meta["num_warps"] * 8
        assert meta["num_warps"] == 32 and 2 * meta["NCHUNK"] * chunk * 2 <= 224 * 1024, ring
        assert ring["copies"] == 3 * meta["NCHUNK"] and plain["copies"] == 2 * meta["NCHUNK"], (ring, plain)
        assert ring["local"] == 0 and ring["base"] == 1 and ring["bar"] <= plain["bar"], (ring, plain)
        assert min(ring["offsets"]) >= 2 * meta["NCHUNK"] * chunk * 2 and ring["regs"] * 1024 <= 65536, ring
        assert ring["vec_loads"] == ring["vec_stores"] == meta["NCHUNK"], ring


def test_resident_rms_norm_widen_drops_the_bf16_permutes() -> None:
    """WIDEN (experiment, off: bf16 widened by a shift and a mask a pair) built for sm_90 at resident shapes through
    windows and aligned, one and two programs an SM, with RING_LAZY and with a staged weight: fewer instructions than
    Triton's widening (which permutes the high element out), no permutes at all on aligned rows (those through windows
    keep their table's), otherwise the same build (copies, 16-byte loads and stores, barriers, nothing in local
    memory)."""
    shapes = [(372, 46501, 46501), (396, 40000, 40000), (1024, 40000, 40000), (1024, 65536, 65536)]
    got = compile_for_sm90(_RMS_RESIDENT_ON_H200, [[*c, 0, 0, 0, 0, 1, widen] for widen in (0, 1) for c in shapes])
    for plain, wide in zip(got[:len(shapes)], got[len(shapes):], strict=True):
        assert wide["meta"].get("WIDEN") is True and "WIDEN" not in plain["meta"], (plain, wide)
        assert wide["instructions"] < plain["instructions"] and wide["prmt"] < plain["prmt"], (plain, wide)
        if not wide["meta"]["REALIGN"]:
            assert wide["prmt"] == 0, wide
        for key in ("copies", "vec_loads", "vec_stores", "bar", "local", "base"):
            assert wide[key] == plain[key], (key, plain, wide)


def test_ring_lazy_is_planned_on_aligned_rows_at_one_program_an_sm_with_rows_to_overlap() -> None:
    """_RESIDENT_RING_ALIGNED's rule on the H200's topology: aligned rows the plan gives one 32-warp program an SM,
    more rows than programs, two sets of slots fitting 224 KB (5-7 chunks of 8192) and no weight staged; not at two
    programs an SM, through windows, at 8 chunks, with a staged weight, or at one row a program."""
    def ring(m: int, n: int) -> tuple[bool, bool]:
        got = rms_norm._resident_config(m, n, n, H200_SMS, H200_SMEM_PER_SM)
        assert got is not None, (m, n)
        return bool(got[1].get("RING")), bool(got[1].get("RING_LAZY"))
    assert ring(396, 40000) == ring(600, 56000) == ring(264, 57344) == (True, True)
    for m, n in ((372, 46501), (1000, 48000), (1024, 40000), (264, 65536), (1024, 65536), (113, 40000), (132, 40000)):
        assert ring(m, n) == (False, False), (m, n)
    forced = rms_norm._resident_config(396, 40000, 40000, H200_SMS, H200_SMEM_PER_SM, ring=True)
    assert forced is not None and forced[1].get("RING") and "RING_LAZY" not in forced[1], forced  # asked: eager


@pytest.mark.parametrize(("m", "n", "ws"), [(1024, 65536, 6), (2048, 40000, 2), (792, 40000, 2), (600, 56000, 0),
                                             (396, 40000, 0), (264, 65536, 0), (120, 100000, 0), (372, 46501, 0),
                                             (1000, 48000, 0)])
def test_wsmem_is_planned_on_aligned_rows_whose_weight_does_not_all_fit_and_that_pay_for_it(m: int, n: int,
                                                                                             ws: int) -> None:
    """WSMEM as planned on the H200's topology: aligned rows whose weight only partly fits beside the row slots, 3
    rows a program or more (1024 x 65536 on 132 programs, 2048 and 792 x 40000 on 264); not where the whole weight
    fits (396 x 40000, 600 x 56000), where a program takes 2 rows or one (264 x 65536, 120 x 100000: staging once a
    program did not pay on the H100), through windows (372 x 46501), or where no chunk fits (1000 x 48000)."""
    got = rms_norm._resident_config(m, n, n, H200_SMS, H200_SMEM_PER_SM)
    assert got is not None and got[1].get("WS", 0) == ws, got


def test_weight_slots_follow_the_shared_memory_left_and_the_shift_classes() -> None:
    """WSMEM's meta: the chunks that fit beside the row's (none: off), PERIOD = the base (8, or LINE's 64) over its
    gcd with the width (odd 8, 2 mod 4: 4, 4 mod 8: 2; aligned: 1), and off where fewer programs than classes."""
    assert rms_norm._weight_slots(132, 46501, 6, 8192, True, 0, 224 * 1024) == {"WS": 6, "PERIOD": 8}
    assert rms_norm._weight_slots(132, 45002, 6, 8192, True, 0, 224 * 1024) == {"WS": 6, "PERIOD": 4}
    assert rms_norm._weight_slots(132, 45004, 6, 8192, True, 0, 224 * 1024) == {"WS": 6, "PERIOD": 2}
    assert rms_norm._weight_slots(132, 46501, 6, 8192, True, 64, 224 * 1024) == {"WS": 6, "PERIOD": 64}
    assert rms_norm._weight_slots(132, 65536, 8, 8192, False, 0, 224 * 1024) == {"WS": 6, "PERIOD": 1}
    assert rms_norm._weight_slots(132, 110000, 14, 8192, True, 0, 224 * 1024) == {}  # no room
    assert rms_norm._weight_slots(7, 46501, 6, 8192, True, 0, 224 * 1024) == {}  # 7 programs, 8 classes
    assert rms_norm._weight_slots(1, 65536, 8, 8192, False, 0, 224 * 1024) == {"WS": 6, "PERIOD": 1}
    assert "WS" not in rms_norm._resident_config(372, 46501, 46501, H200_SMS, H200_SMEM_PER_SM)[1]  # type: ignore[index]


@pytest.mark.parametrize(("m", "n", "stride", "expected"), [
    (1024, 40000, 40000, (264, 16, 10)), (250, 45001, 45001, (250, 16, 11)), (1024, 49152, 49152, (264, 16, 12)),
    (1024, 49153, 49153, (132, 32, 7)), (1024, 49145, 49145, (264, 16, 12)), (120, 100003, 100003, (120, 32, 13)),
    (512, 114688, 114688, (132, 32, 14)), (512, 114681, 114681, (132, 32, 14)), (512, 114682, 114682, None),
    (400, 40000, 40000, None), (448, 40000, 40000, None), (449, 40000, 40000, (264, 16, 10)),
    (113, 65536, 65536, (113, 32, 8)), (113, 40000, 40000, (113, 32, 5)), (225, 40000, 40000, (225, 16, 10)),
    (1024, 40001, 40003, None)])
def test_resident_rms_norm_config_by_rows_and_width(m: int, n: int, stride: int,
                                                    expected: tuple[int, int, int] | None) -> None:
    """Programs, warps and chunks of the resident path on the H200's topology: two 16-warp programs an SM (264) while
    two whole rows fit 200 KB (49152 positions: 12 chunks of 4096; a window of 49145 + 7), one 32-warp program an SM
    (132) up to 224 KB (14 chunks of 8192: 114688, a window of 114681 + 7), never more programs than rows; rows must
    fill 85% of their last round of programs (400 rows of 40000: 0.76 of 528 programs and of 528 SMs' rounds; 448
    rows are a row short of 85% of 528 programs, 449 are not; 113 rows of 40000 fill 0.43 of 264 programs but 0.86
    of 132 SMs, so they run one an SM), and rows off the grid must be contiguous."""
    got = rms_norm._resident_config(m, n, stride, H200_SMS, H200_SMEM_PER_SM)
    assert (got if got is None else (got[0], got[1]["num_warps"], got[1]["NCHUNK"])) == expected, got
    if got is not None:  # two programs an SM through windows: registers capped so that both fit
        assert got[1].get("maxnreg") == (64 if got[1]["num_warps"] == 16 and got[1]["REALIGN"] else None), got
    one = rms_norm._resident_config(m, n, stride, H200_SMS, H200_SMEM_PER_SM, per_sm=1)
    if one is not None:  # asked for one an SM: 32 warps, half of the programs staggered
        assert one[0] == min(m, H200_SMS) and one[1]["num_warps"] == 32 and one[1]["STAGGER"] == 2500, one
