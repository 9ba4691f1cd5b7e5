"""The experimental kernels the sweep evaluates compute the right thing before any timing of them means anything.

Under the interpreter programs run one after another, so a row's programs can only meet when there is one per row:
these tests run the split rms_norm with one chunk per row (its arithmetic, masks, strides and the counter path);
the many-chunk rendezvous runs on the GPU, checked by benchmarks/kernel_sweep.py before it is timed. The pipelined
(persistent, prefetching) kernels have no cross-program dependence and run whole here, with the SM count cut to 4 so
that each program walks several rows and prefetches past the last one; so does the persistent split rms_norm with
one chunk per row.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import experimental_kernels
import experimental_looped
import experimental_rms_two_phase
import experimental_wide
import resident_common

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1000, 1001])  # aligned and unaligned rows
def test_split_rms_norm_matches_the_reference(n: int, dtype: torch.dtype) -> None:
    base = torch.randn(5, n + 24, device=DEVICE).to(dtype)
    x = base[:, :n]  # padded rows: stride n + 24
    w = torch.randn(n, device=DEVICE).to(dtype)
    y = experimental_kernels.rms_norm_split(x, w, 1e-6, chunk=1024, warps=4)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-5)
    assert torch.equal(experimental_kernels.rms_norm_split(x, w, 1e-6, chunk=1024, warps=4), y)


def _rms_norm_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()


@pytest.fixture
def four_sms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grids of programs_per_sm x 4 programs: fewer than the rows, so every program loops."""
    monkeypatch.setattr(experimental_kernels, "_num_sms", lambda device: 4)


PIPELINED_CASES = [  # (dtype, prefetch, packed)
    (torch.float32, True, False), (torch.float32, False, False),
    (torch.bfloat16, True, False), (torch.bfloat16, False, False), (torch.bfloat16, True, True),
    (torch.bfloat16, False, True), (torch.float16, True, True),
]


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize(("dtype", "prefetch", "packed"), PIPELINED_CASES)
@pytest.mark.parametrize(("m", "n", "pad", "per_sm"), [
    (37, 1000, 24, 2),  # 8 programs of 4-5 rows, padded row stride
    (5, 300, 0, 1),  # 4 programs: one walks 2 rows, three walk 1
    (9, 998, 2, 16),  # more programs than rows: capped at one row each
])
def test_pipelined_kernels_match_the_reference(m: int, n: int, pad: int, per_sm: int, dtype: torch.dtype,
                                               prefetch: bool, packed: bool) -> None:
    base = torch.randn(m, n + pad, device=DEVICE).to(dtype)
    x = base[:, :n]
    w = torch.randn(n, device=DEVICE).to(dtype)
    wide = dtype != torch.float32
    softmax = experimental_kernels.softmax_pipelined(x, per_sm, 4, prefetch, packed=packed)
    assert softmax.shape == (m, n) and softmax.stride() == (n, 1) and softmax.dtype == dtype
    torch.testing.assert_close(softmax.float(), torch.softmax(x.float(), -1), rtol=1e-2 if wide else 1e-5,
                               atol=1e-5 if wide else 1e-7)
    rms = experimental_kernels.rms_norm_pipelined(x, w, 1e-6, per_sm, 4, prefetch, packed=packed)
    assert rms.shape == (m, n) and rms.stride() == (n, 1) and rms.dtype == dtype
    torch.testing.assert_close(rms.float(), _rms_norm_ref(x, w), rtol=2e-2 if wide else 1e-5, atol=1e-5)


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize(("prefetch", "packed"), [(True, False), (False, False), (True, True)])
def test_pipelined_kernels_are_bit_exact_across_calls(prefetch: bool, packed: bool) -> None:
    x = torch.randn(37, 1024, device=DEVICE).to(torch.bfloat16)[:, :1000]
    w = torch.randn(1000, device=DEVICE).to(torch.bfloat16)
    runs: list[Callable[..., torch.Tensor]] = [
        partial(experimental_kernels.softmax_pipelined, x, 2, 4, prefetch, packed=packed),
        partial(experimental_kernels.rms_norm_pipelined, x, w, 1e-6, 2, 4, prefetch, packed=packed),
    ]
    for run in runs:
        first = run()
        # the replay writes over NaNs: every element is written, and to the same bits
        assert torch.equal(run(y=torch.full_like(first, float("nan"))), first)

def test_pipelined_kernels_write_into_y_and_refuse_what_they_cannot_hold() -> None:
    x = torch.randn(3, 64, device=DEVICE)
    w = torch.randn(64, device=DEVICE)
    y = torch.full_like(x, float("nan"))
    assert experimental_kernels.softmax_pipelined(x, 1, 4, y=y) is y
    torch.testing.assert_close(y, torch.softmax(x, -1))
    assert experimental_kernels.rms_norm_pipelined(x, w, 1e-6, 1, 4, y=y) is y
    torch.testing.assert_close(y, _rms_norm_ref(x, w))
    assert experimental_kernels.softmax_pipelined(x[:0], 1, 4).shape == (0, 64)
    with pytest.raises(ValueError, match="16-bit"):
        experimental_kernels.softmax_pipelined(x, 1, 4, packed=True)  # fp32
    with pytest.raises(ValueError, match="16-bit"):
        experimental_kernels.rms_norm_pipelined(x.half()[:, :63], w.half()[:63], 1e-6, 1, 4, packed=True)  # odd N
    with pytest.raises(ValueError, match="N <= 32768"):
        experimental_kernels.softmax_pipelined(torch.empty(1, 32769, device=DEVICE), 1, 4)


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persistent_split_rms_norm_walks_rows_and_matches_the_reference(prefetch: bool, dtype: torch.dtype) -> None:
    base = torch.randn(37, 1001 + 24, device=DEVICE).to(dtype)
    x = base[:, :1001]  # unaligned rows, padded stride: 8 programs of one chunk each walk 4-5 rows
    w = torch.randn(1001, device=DEVICE).to(dtype)
    y = experimental_kernels.rms_norm_split_persistent(x, w, 1e-6, chunk=1024, warps=4, programs_per_sm=2,
                                                       prefetch=prefetch)
    wide = dtype != torch.float32
    torch.testing.assert_close(y.float(), _rms_norm_ref(x, w), rtol=2e-2 if wide else 1e-5, atol=1e-5)
    again = experimental_kernels.rms_norm_split_persistent(x, w, 1e-6, 1024, 4, 2, prefetch,
                                                           y=torch.full_like(y, float("nan")))
    assert torch.equal(again, y)  # every element written, to the same bits


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persistent_split_softmax_walks_rows_and_matches_the_reference(prefetch: bool, dtype: torch.dtype) -> None:
    base = torch.randn(37, 1001 + 24, device=DEVICE).to(dtype)
    x = base[:, :1001]
    x[3, :] = float("-inf")  # an all -inf row: (max=-inf, sum=0) must not poison the merge ...
    x[3, 7] = 0.0  # ... except for the one finite entry, which takes all the mass
    y = experimental_kernels.softmax_split_persistent(x, chunk=1024, warps=4, programs_per_sm=2, prefetch=prefetch)
    wide = dtype != torch.float32
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2 if wide else 1e-5,
                               atol=1e-5 if wide else 1e-7)
    again = experimental_kernels.softmax_split_persistent(x, 1024, 4, 2, prefetch, y=torch.full_like(y, float("nan")))
    assert torch.equal(again, y)


@pytest.mark.parametrize("shifted_weight", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_realigned_split_rms_norm_loads_the_right_columns(shifted_weight: bool, dtype: torch.dtype) -> None:
    """Rows of 1001 elements start at every offset within a vector, so chunks cut at the tensor's vector boundaries
    are interior on some rows and cross row ends on others. Programs run one after another here, so each row's
    counter starts one short of complete and the other chunks' partial sums are filled in from the host: every
    program proceeds at once, and what is tested is which columns each chunk loads, scales and stores."""
    m, n, chunk = 9, 1001, 256
    x = torch.randn(m, n, device=DEVICE).to(dtype)
    w = torch.randn(n, device=DEVICE).to(dtype)
    vec = 16 // x.element_size()
    n_parts = -(-(n + vec - 1) // chunk)
    flat = torch.cat([torch.zeros(vec, device=DEVICE), x.float().reshape(-1), torch.zeros(chunk * n_parts)])
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=DEVICE)
    for r in range(m):
        start = r * n - (r * n) % vec  # the row's first element rounded down to a vector boundary
        for p in range(n_parts):
            lo, hi = max(start + p * chunk, r * n), min(start + (p + 1) * chunk, (r + 1) * n)
            partials[r, p] = flat[vec + lo: vec + hi].pow(2).sum() if hi > lo else 0.0
    done = torch.full((m,), n_parts - 1, dtype=torch.int32, device=DEVICE)
    pitch = -(-(n + vec) // vec) * vec
    weights = w
    if shifted_weight:
        weights = torch.empty((vec, pitch), dtype=dtype, device=DEVICE)
        experimental_kernels._shift_weight[(vec, -(-n // 1024))](w, weights, n, pitch, BLOCK=1024)
    y = torch.full_like(x, float("nan"))
    experimental_kernels._rms_norm_split_realigned[(m * n_parts,)](
        x, weights, y, partials, done, n, 1e-6, n_parts, pitch, CHUNK=chunk, BLOCK_S=4, VEC=vec,
        SHIFTED_W=shifted_weight)
    wide = dtype != torch.float32
    torch.testing.assert_close(y.float(), _rms_norm_ref(x, w), rtol=2e-2 if wide else 1e-5, atol=1e-5)


@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize(("m", "n"), [(5, 1000), (3, 4097)])  # ragged last chunk; padded rows below
def test_looped_kernels_match_the_reference(m: int, n: int, stages: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experimental_looped, "_num_sms", lambda device: 2)  # each program walks several rows
    base = (torch.randn(m, n + 24, device=DEVICE) * 4).to(torch.bfloat16)
    x = base[:, :n]
    x[0, ::3] = float("-inf")  # masked logits: lanes that see only -inf for a while
    w = torch.randn(n, device=DEVICE).to(torch.bfloat16)
    y = experimental_looped.softmax_looped(x, chunk=256, warps=4, stages=stages, programs_per_sm=1)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=1e-5)
    x = (torch.randn(m, n + 24, device=DEVICE) * 4).to(torch.bfloat16)[:, :n]
    y = experimental_looped.rms_norm_looped(x, w, 1e-6, chunk=256, warps=4, stages=stages, programs_per_sm=1)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=1e-5)


@pytest.mark.parametrize("bound", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("shape", [(5, 1001), (3, 1003), (4, 1000)])  # odd and 8-aligned rows
def test_realigned_softmax_variants_match_the_reference(bound: int, shape: tuple[int, int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bounds variant the sweep times (experimental_realigned.py), on a grid of 2 programs that walk several
    rows and prefetch past the last one: the right softmax, and the same bits on a replay."""
    import experimental_realigned

    from kernelproof_core.kernels import softmax

    monkeypatch.setattr(softmax, "_num_sms", lambda device: 2)
    x = (torch.randn(*shape, device=DEVICE) * 4).to(torch.bfloat16)
    x[0, ::7] = float("-inf")
    ref = torch.softmax(x.float(), -1)
    y = torch.full_like(x, float("nan"))
    experimental_realigned.softmax_realigned_x(x, y, bound, True, 1, 4)
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=1e-5)
    again = torch.empty_like(y)
    experimental_realigned.softmax_realigned_x(x, again, bound, True, 1, 4)
    assert torch.equal(again, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(7, 1001, 3), (5, 1000, 1), (4, 1001, 0), (3, 999, 8)])
def test_reread_softmax_matches_the_reference(m: int, n: int, pad: int, dtype: torch.dtype,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Padded rows whose x and y windows are shifted against each other by every amount (odd padding), or not at all:
    the reductions read x's window, the output pass re-reads x at y's window positions. Two "SMs": programs walk
    rows and prefetch past the last."""
    monkeypatch.setattr(experimental_wide.softmax, "_num_sms", lambda device: 2)
    x = (torch.randn(m, n + pad, device=DEVICE) * 4).to(dtype)[:, :n]
    x[0, ::3] = float("-inf")
    y = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    experimental_wide.softmax_reread(x, y, programs_per_sm=1, warps=4)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2 if dtype != torch.float32 else 1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("n", "pad", "chunk_bytes"), [(1001, 0, 4096), (1001, 8, 4096), (1001, 0, 512),
                                                       (1000, 0, 512), (1001, 8, 512)])
def test_split_realigned_softmax_loads_the_right_columns(n: int, pad: int, chunk_bytes: int,
                                                         dtype: torch.dtype) -> None:
    """Rows start at every offset within a vector, so chunks cut from each row's vector window hold interior
    vectors, a row's edge vectors, or nothing of the row. With one chunk per row (4096 bytes) the kernel runs whole;
    with several, programs run one after another here, so each row's counter starts one short of complete and the
    partials are filled in from the host (what is tested is which elements each chunk loads, reduces and stores)."""
    m = 9
    x = (torch.randn(m, n + pad, device=DEVICE) * 4).to(dtype)[:, :n]
    x[0, ::3] = float("-inf")
    y = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    vec, chunk = 16 // x.element_size(), chunk_bytes // x.element_size()
    n_parts = -(-(n + vec - 1) // chunk)
    if n_parts == 1:
        experimental_wide.softmax_split_realigned(x, y, chunk_bytes, warps=4)
    else:
        partials = torch.empty((2, m, n_parts), dtype=torch.float32, device=DEVICE)
        xf = x.float()
        for r in range(m):
            shift = (r * n) % vec  # the row's first element within its first window vector
            for p in range(n_parts):
                part = xf[r, max(0, p * chunk - shift): max(0, (p + 1) * chunk - shift)]
                mx = part.max() if part.numel() else torch.tensor(float("-inf"))
                partials[0, r, p] = mx
                partials[1, r, p] = (part - (0.0 if mx == float("-inf") else mx)).exp().sum()
        done = torch.full((m,), n_parts - 1, dtype=torch.int32, device=DEVICE)
        plan = experimental_wide.softmax._split_realigned_plan(m, n, x.stride(0), x.element_size(), chunk_bytes, 4)
        assert plan.n_parts == n_parts
        plan.launch(x, y, partials, done, m, n, x.stride(0), n_parts, **plan.meta)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2 if dtype != torch.float32 else 1e-5,
                               atol=1e-6)


_COMPILE_WS = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_resident_ws as ws
from kernelproof_core.precompile import compile_only
out = []
for m, n, warps, programs in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    with compile_only("cuda", 90, 32):
        ptx = ws.launch(x, torch.empty_like(x), programs, warps).asm["ptx"]
    out.append({"cta_bars": len(re.findall(r"bar\\.sync\\s+\\d+;", ptx)),
                "partition_bars": sorted(set(re.findall(r"bar\\.sync\\s+\\d+, (\\d+);", ptx))),
                "noinc": ptx.count("cp.async.mbarrier.arrive.noinc"), "wait_group": ptx.count("cp.async.wait_group")})
print(json.dumps(out))
"""


def test_warp_specialised_resident_softmax_compiles_without_cta_wide_barriers() -> None:
    """The experiment exists to take copy waits off the consumers' critical path: built for the H200's target (no
    GPU needed; a fresh process, in case this one interprets), its consumers sync only among themselves (named
    barriers counting the consumer threads, or the whole CTA once around set-up), copies complete through
    mbarriers (one arrival per producer thread per chunk), never through cp.async.wait_group."""
    import json
    import os
    import subprocess

    shapes = [(1024, 65536, 16, 132), (1024, 40000, 8, 264)]
    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_WS, json.dumps(shapes), bench], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for (_m, n, warps, _p), r in zip(shapes, results, strict=True):
        assert r["cta_bars"] == 0, r
        assert set(r["partition_bars"]) <= {str(32 * warps), str(32 * (warps + 1))}, r
        assert r["noinc"] == -(-n // 4096) and r["wait_group"] == 0, r


@pytest.mark.parametrize("n_chunks", range(1, 40))
def test_resident_experiments_slots_are_two_power_of_two_buffers_within_budget(n_chunks: int) -> None:
    """The earlier slot layout the warp-specialised and ablation experiments keep (resident_common.py): two
    power-of-two buffers holding at least three quarters of what fits, never more; a chunk over the budget is
    refused."""
    chunk_bytes, budget = 8192, 200 * 1024
    a, b = resident_common._resident_chunks(n_chunks, chunk_bytes, budget)
    fit = min(n_chunks, budget // chunk_bytes)
    assert a & (a - 1) == 0 and a >= 1 and (b == 0 or b & (b - 1) == 0)
    assert fit * 3 // 4 <= a + b <= fit
    with pytest.raises(ValueError, match="does not fit"):
        resident_common._resident_chunks(n_chunks, budget + 1, budget)


_COMPILE_CLUSTER = """
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_cluster as ec
from kernelproof_core.precompile import compile_only
out = []
for n, g, warps in json.loads(sys.argv[1]):
    x = torch.empty((4, n), dtype=torch.bfloat16)
    part = ec.triton_next_pow2(-(-n // g))
    with compile_only("cuda", 90, 32):
        kernel = ec._softmax_cluster[(4,)](x, x, torch.empty(8 * g), n, n, G=g, PART=part, VEC=8, KEEP_E=True,
                                           num_warps=warps, num_ctas=g)
    ptx = kernel.asm["ptx"]
    out.append({"ctas": kernel.metadata.num_ctas, "cluster": f".reqnctapercluster {g}" in ptx,
                "arrive": ptx.count("barrier.cluster.arrive"), "wait": ptx.count("barrier.cluster.wait"),
                "rank_reads": ptx.count("%cluster_ctarank"), "stores": ptx.count("st.global.v4"),
                "loads": ptx.count("ld.global.v4"), "part": part})
print(json.dumps(out))
"""


def test_cluster_softmax_compiles_to_one_cluster_barrier_and_per_cta_stores() -> None:
    """The cluster experiment depends on three things Triton does not promise: the launch is a cluster of G CTAs,
    the partials meet behind exactly one hardware cluster barrier, and each CTA stores its own part (a tensor
    Triton believed replicated over CTAs would have its stores predicated on CTA rank 0: the rank is read once, to
    pick the part). Built for the H200's target, no GPU needed."""
    import json
    import os
    import subprocess

    cases = [(65536, 4, 2), (131072, 8, 4), (32000, 2, 4)]
    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_CLUSTER, json.dumps(cases), bench], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    for (_n, g, warps), r in zip(cases, json.loads(done.stdout.strip().splitlines()[-1]), strict=True):
        assert r["ctas"] == g and r["cluster"] and r["arrive"] == r["wait"] == 1 and r["rank_reads"] == 1, r
        assert r["stores"] == r["loads"] == r["part"] // (8 * 32 * warps), r


_COMPILE_RMS_RESIDENT = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_rms_resident as er
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, realign in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    _launch, meta = softmax._resident_plan(m, n, softmax._align(2, n), 2, 132, 233472, realign=realign)
    meta = {k: v for k, v in meta.items() if k not in ("CARRY", "KEEP", "HOLD")}  # softmax's options
    with compile_only("cuda", 90, 32):
        k = er._rms_norm_resident.warmup(x, torch.empty(n, dtype=torch.bfloat16), torch.empty_like(x), m, n, n, 1e-6,
                                         **meta, grid=(1,))
    ptx = k.asm["ptx"]
    out.append({"nchunk": meta["NCHUNK"], "nres": meta["NRES"], "copies": len(re.findall(r"cp\\.async\\.c[ag]", ptx)),
                "vec_loads": len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)),
                "vec_stores": len(re.findall(r"st\\.global[^;]*\\.v4", ptx)), "local": ptx.count(".local"),
                "rsqrt": ptx.count("rsqrt")})
print(json.dumps(out))
"""


def test_resident_rms_norm_compiles_to_copies_and_vector_accesses() -> None:
    """The resident rms_norm experiment (rows wider than 32768 in shared memory) built for the H200's target (no GPU
    needed; a fresh process): one 16-byte cp.async per thread per chunk in the prologue and again as each slot is
    refilled, the weight read and the output written 16 bytes wide where rows are aligned, one rsqrt a row, nothing in
    local memory. Numbers on the GPU: kernel_sweep.py --only rms_norm_resident."""
    import json
    import os
    import subprocess

    shapes = [(1024, 65536, False), (1024, 40000, False), (425, 52717, True)]
    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_RMS_RESIDENT, json.dumps(shapes), bench],
                          capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for (_m, _n, realign), r in zip(shapes, results, strict=True):
        assert r["nres"] == r["nchunk"] and r["copies"] == 2 * r["nchunk"], r
        assert r["local"] == 0 and r["rsqrt"] >= 1, r
        assert r["vec_stores"] == r["nchunk"], r  # y's whole vectors, 16 bytes wide (REALIGN: y's window)
        # the weight: a vector a chunk on aligned rows; REALIGN reads it at w[p - shift], element by element
        assert r["vec_loads"] == (0 if realign else r["nchunk"]), r


_COMPILE_RMS_CLUSTER = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_rms_cluster as rc
from experimental_cluster import triton_next_pow2
from kernelproof_core.precompile import compile_only
out = []
for n, g, warps, realign in json.loads(sys.argv[1]):
    x = torch.empty((4, n), dtype=torch.bfloat16)
    part = triton_next_pow2(-(-(n + 7 if realign else n) // g))
    with compile_only("cuda", 90, 32):
        kernel = rc._rms_norm_cluster[(4,)](x, torch.empty(n, dtype=torch.bfloat16), x, torch.empty(4 * g), n, n,
                                            1e-6, G=g, PART=part, VEC=8, REALIGN=realign, num_warps=warps,
                                            num_ctas=g)
    ptx = kernel.asm["ptx"]
    out.append({"ctas": kernel.metadata.num_ctas, "arrive": ptx.count("barrier.cluster.arrive"),
                "wait": ptx.count("barrier.cluster.wait"), "vec_loads": len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)),
                "vec_stores": len(re.findall(r"st\\.global[^;]*\\.v4", ptx)), "local": ptx.count(".local"),
                "part": part})
print(json.dumps(out))
"""


def test_cluster_rms_norm_compiles_to_one_cluster_barrier_and_vector_accesses() -> None:
    """The cluster rms_norm experiment built for the H200's target (no GPU needed; a fresh process): a cluster of G
    CTAs meeting behind exactly one hardware cluster barrier; each thread's part read and written 16 bytes at a time,
    the weight too where rows are aligned (realigned rows read it at p - shift, element by element); nothing in local
    memory. Numbers on the GPU: kernel_sweep.py --only rms_norm_cluster."""
    import json
    import os
    import subprocess

    cases = [(65536, 8, 4, False), (52717, 8, 4, True), (24577, 4, 4, True), (40000, 4, 8, False)]
    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_RMS_CLUSTER, json.dumps(cases), bench], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    for (_n, g, warps, realign), r in zip(cases, json.loads(done.stdout.strip().splitlines()[-1]), strict=True):
        assert r["ctas"] == g and r["arrive"] == r["wait"] == 1 and r["local"] == 0, r
        per_thread = r["part"] // (8 * 32 * warps)  # 16-byte vectors a thread
        assert r["vec_stores"] == per_thread and r["vec_loads"] == per_thread * (1 if realign else 2), r


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(5, 9001, 0), (4, 9001, 24), (3, 8200, 0), (3, 9003, 6)])
@pytest.mark.parametrize(("chunk", "warps", "batches", "reverse", "hints"),
                         [(4096, 4, 1, True, True), (2048, 2, 2, False, False), (8192, 8, 3, True, False)])
def test_two_phase_rms_norm_matches_the_reference_and_replays(m: int, n: int, pad: int, dtype: torch.dtype,
                                                               chunk: int, warps: int, batches: int, reverse: bool,
                                                               hints: bool) -> None:
    """rms_norm in two launches a batch (experimental_rms_two_phase): unaligned rows through their vector windows
    (contiguous, and padded by whole and half vectors), aligned rows in plain chunks, rows in batches, the scaling
    launch walking chunks in reverse: within bf16/fp16 rounding of fp32, the same bits on a second call."""
    x = (torch.randn(m, n + pad, device=DEVICE) * 3).to(dtype)[:, :n]
    w = torch.randn(n, device=DEVICE).to(dtype)
    y = torch.empty((m, n), dtype=dtype, device=DEVICE)
    out = experimental_rms_two_phase.rms_norm_two_phase(x, w, 1e-6, y, chunk, warps, batches, reverse, hints).clone()
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
    assert torch.equal(out, experimental_rms_two_phase.rms_norm_two_phase(x, w, 1e-6, y, chunk, warps, batches,
                                                                          reverse, hints))


_COMPILE_CLUSTER_SOFTMAX = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_cluster_resident as cres
import experimental_cluster_rows as cr
from kernelproof_core.precompile import compile_only
out = []
for kind, n, g, warps, deferred in json.loads(sys.argv[1]):
    x = torch.empty((64, n), dtype=torch.bfloat16)
    y, words = torch.empty_like(x), torch.zeros(64 * g, dtype=torch.int64)
    with compile_only("cuda", 90, 32):
        if kind == "rows":
            kernel = cr.cluster_rows(x, y, words, g, warps, 4, False, deferred)
        else:
            kernel = cres.cluster_resident(x, y, words, g, warps, 4, kind != "resident", kind.startswith("copy"),
                                           kind.endswith("free"))
    lines = kernel.asm["ptx"].splitlines()
    polls = [i for i, line in enumerate(lines) if "ld.volatile.global.b64" in line]
    syncs = [i for i, line in enumerate(lines) if re.search(r"barrier\\.cluster|membar|fence\\.", line)]
    out.append({"ctas": kernel.metadata.num_ctas, "polls": len(polls), "syncs_before_last_poll":
                sum(i < polls[-1] for i in syncs) if polls else -1, "syncs": len(syncs),
                "vec_loads": sum(bool(re.search(r"ld\\.global[^;]*\\.v4", line)) for line in lines),
                "vec_stores": sum(bool(re.search(r"st\\.global[^;]*\\.v4", line)) for line in lines),
                "copies": sum("cp.async.cg.shared.global" in line for line in lines),
                "local": sum(".local" in line for line in lines), "shared": kernel.metadata.shared,
                "ex2": sum("ex2.approx" in line for line in lines), "bars": sum("bar.sync" in line for line in lines),
                "waits": sum("cp.async.wait_group" in line for line in lines)})
print(json.dumps(out))
"""


def _compile_cluster_softmax(cases: list[tuple[str, int, int, int, bool]]) -> list[dict[str, int]]:
    import json
    import os
    import subprocess

    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_CLUSTER_SOFTMAX, json.dumps(cases), bench],
                          capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    results: list[dict[str, int]] = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == len(cases)
    for (kind, _n, g, _warps, _deferred), r in zip(cases, results, strict=True):
        assert r["vec_stores"] > 0 and r["local"] == 0, r
        if kind not in ("resident", "rows"):  # the pipeline alone: no words, so no poll and no fence
            assert r["polls"] == 0 and r["syncs"] == 0, r
            continue
        # Parts meet by polled words, never by a fence or cluster barrier in the row loop: one there would wait for
        # the next rows' loads; the only cluster barrier comes after the last poll, before the words are cleared
        # (none in a cluster of one, a launch without clusters).
        assert r["ctas"] == g and r["polls"] >= 1 and r["syncs_before_last_poll"] == 0, r
        assert (r["syncs"] >= 1) == (g > 1), r
    return results


def test_cluster_rows_meet_without_a_fence_in_the_row_loop() -> None:
    """The persistent cluster softmax experiments (experimental_cluster_rows) built for the H200's target (no GPU
    needed; a fresh process): a cluster of G CTAs whose row loop publishes and polls 64-bit words with volatile loads
    and holds no fence or cluster barrier; rows read and written 16 bytes at a time. Numbers on the GPU:
    kernel_sweep.py --only softmax_cluster_rows (evidence/h200/2026-12-05_cluster_rows/)."""
    results = _compile_cluster_softmax([("rows", 65536, 2, 16, False), ("rows", 65536, 4, 16, True),
                                        ("rows", 131072, 8, 16, True)])
    assert all(r["vec_loads"] > 0 for r in results), results


def test_cluster_resident_softmax_holds_three_parts_in_shared_memory_without_a_fence() -> None:
    """experimental_cluster_resident built for sm_90: every part copied by 16-byte cp.async (NCH chunks a part, the
    first two rows' parts before the loop and one part for each of the three rows an iteration), three parts' slots
    within one CTA's shared memory (two CTAs an SM where parts are 16384 wide), no fence in the row loop, nothing in
    local memory. Numbers on the GPU: kernel_sweep.py --only softmax_cluster_resident."""
    cases = [("resident", 65536, 2, 16, False), ("resident", 65536, 4, 8, False), ("resident", 128256, 8, 16, False),
             ("resident", 32768, 1, 16, False)]
    for (_kind, n, g, warps, _d), r in zip(cases, _compile_cluster_softmax(cases), strict=True):
        part_bytes = -(-n // (g * 32 * warps * 8)) * 32 * warps * 8 * 2
        nch = part_bytes // (32 * warps * 16)
        assert r["copies"] == 5 * nch, r
        assert 3 * part_bytes <= r["shared"] <= 3 * part_bytes + 1024 and r["shared"] <= 227 * 1024, r


def test_pipeline_alone_keeps_the_copies_and_drops_the_rendezvous_or_the_arithmetic() -> None:
    """softmax_pipeline_local's controls, built for sm_90: the cluster-of-one pipeline with each row scaled by its
    own stats (no words polled) and as a plain copy through the same slots (no exponential), both with the resident
    kernel's 16-byte copies and both also without the barrier after each chunk's wait, so that the H200 can tell
    the rendezvous', the arithmetic's and the barriers' costs apart."""
    local, copy, local_free, copy_free = _compile_cluster_softmax(
        [(kind, 32768, 1, 16, False) for kind in ("local", "copy", "local_free", "copy_free")])
    assert local["copies"] == copy["copies"] == copy_free["copies"] == 5 * 8, (local, copy)  # 8 chunks of 512 x 8
    assert local["ex2"] > 0 and copy["ex2"] == 0, (local, copy)
    # The free forms wait as often, without Gluon's barrier after each wait: a barrier a step (before its copies
    # overwrite the slots last read) and the CTA-wide reductions' remain.
    assert local_free["waits"] == local["waits"] and copy_free["waits"] == copy["waits"], (local_free, local)
    assert copy_free["bars"] <= copy["bars"] - 3 * 8 and local_free["bars"] <= local["bars"] - 3 * 8, (copy_free, copy)


def test_close_twice_needs_two_right_launches_and_survives_a_failing_one(capsys: pytest.CaptureFixture[str]) -> None:
    """The sweeps' check before timing (sweep_common.close_twice): both launches must write the reference (the
    second is how a workspace left dirty by the first shows), and a launch that raises is reported, not fatal."""
    from sweep_common import close_twice

    ref = torch.softmax(torch.randn(4, 64), dim=-1)
    y = torch.empty_like(ref)
    calls: list[int] = []

    def right_once() -> None:
        calls.append(1)
        y.copy_(ref if len(calls) == 1 else torch.zeros_like(ref))

    def raises() -> None:
        raise RuntimeError("out of resource: shared memory")

    assert close_twice(partial(y.copy_, ref), y, ref, "right")
    assert not close_twice(right_once, y, ref, "once") and len(calls) == 2
    assert not close_twice(raises, y, ref, "broken")
    out = capsys.readouterr().out
    assert "once (again): WRONG" in out and "broken: ERROR RuntimeError: out of resource" in out


_COMPILE_TMA_ROWS = """
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_tma_rows as t
from kernelproof_core.precompile import compile_only
out = []
for n, g, warps, boxes in json.loads(sys.argv[1]):
    x = torch.empty((64, n), dtype=torch.bfloat16)
    words = t.PartWords.for_rows(64, g, x.device) if g > 1 else None
    with compile_only("cuda", 90, 32):
        kernel = t.tma_parts(x, torch.empty_like(x), words, g, warps, 4 * g, boxes)
    ptx = kernel.asm["ptx"]
    out.append({"copies": ptx.count("cp.async.bulk.tensor.3d"), "waits": ptx.count("mbarrier.try_wait.parity"),
                "arrivals": ptx.count("mbarrier.arrive.shared"), "expects": ptx.count("mbarrier.arrive.expect_tx"),
                "per_thread_copies": ptx.count("cp.async.cg"), "local": ptx.count(".local"),
                "polls": ptx.count("ld.volatile.global"), "fences": ptx.count("membar") + ptx.count("fence.acq_rel")
                + ptx.count("fence.sc"), "launches": words.launches if words else 0,
                "shared": kernel.metadata.shared})
print(json.dumps(out))
"""


def test_tma_rows_copy_a_part_with_one_thread_and_advance_every_phase() -> None:
    """experimental_tma_rows built for sm_90: each part's copy is `boxes` TMA boxes issued once (two rows before the
    loop, one for each of the three rows an iteration), with no per-thread cp.async; each issue either expects the
    part's bytes or, past the last row, arrives plainly, so every slot's phase advances; three 64 KB slots. Rows cut
    over G CTAs poll their words (three steps an iteration and the first row) with no fence anywhere, and a launch
    moves to the other word buffer. Numbers on the GPU: kernel_sweep.py --only softmax_pipeline_local,
    softmax_tma_parts."""
    import json
    import os
    import subprocess

    cases = [(32768, 1, 16, 1), (32768, 1, 32, 4), (65536, 2, 16, 1), (128256, 4, 32, 2)]
    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_TMA_ROWS, json.dumps(cases), bench], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    for (_n, g, _warps, boxes), r in zip(cases, json.loads(done.stdout.strip().splitlines()[-1]), strict=True):
        assert r["copies"] == 5 * boxes and r["expects"] == r["arrivals"] == 5, r
        assert r["waits"] == 5 and r["per_thread_copies"] == 0 and r["local"] == 0, r  # prologue, A, B, C, the last
        assert 3 * 65536 <= r["shared"] <= 3 * 65536 + 1024, r
        assert r["polls"] == (6 if g > 1 else 0) and r["fences"] == 0 and r["launches"] == (g > 1), r


def test_tma_rows_refuse_rows_a_box_cannot_carry() -> None:
    """TMA does not realign: rows that are not whole 256-element box rows are refused on the host before anything is
    built, as are parts whose three slots exceed shared memory and parts of a row without words to meet by."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import experimental_tma_rows as t

    x = torch.empty((4, 33508), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of 256"):
        t.tma_rows(x, torch.empty_like(x), 16, 4)
    x = torch.empty((4, 65536), dtype=torch.bfloat16)  # three whole rows are 384 KB; two parts of 64 KB fit
    with pytest.raises(ValueError, match="do not fit"):
        t.tma_rows(x, torch.empty_like(x), 16, 4)
    with pytest.raises(ValueError, match="words"):
        t.tma_parts(x, torch.empty_like(x), None, 2, 16, 4)
    x = torch.empty((4, 32768), dtype=torch.float32)
    with pytest.raises(ValueError, match="16-bit"):
        t.tma_rows(x, torch.empty_like(x), 16, 4)


_COMPILE_TMA_FLAT = """
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_tma_flat as f
from kernelproof_core.precompile import compile_only
out = []
for m, n, warps in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    with compile_only("cuda", 90, 32):
        kernel = f.tma_flat_rows(x, torch.empty_like(x), warps, 4)
    ptx = kernel.asm["ptx"]
    out.append({"copies": ptx.count("cp.async.bulk.tensor.3d"), "vec_stores": ptx.count("st.global.v4"),
                "per_thread_copies": ptx.count("cp.async.cg"), "shared": kernel.metadata.shared})
print(json.dumps(out))
"""


def test_tma_flat_rows_copy_any_width_in_boxes_and_store_whole_vectors() -> None:
    """experimental_tma_flat built for sm_90 at random2's and random0's widths (rows off the 16-byte grid): a row's
    copy is NB boxes of W box rows of the flat view (two rows before the loop, one a row in it, emitted for each of
    the three slots), three slots of NB boxes in shared memory, no per-thread copies, and the output written in
    16-byte vectors (the vectors wholly inside the row; its two edge vectors element by element)."""
    import json
    import os
    import subprocess

    cases = [(1991, 33508, 16), (1723, 25249, 8)]
    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    done = subprocess.run([sys.executable, "-c", _COMPILE_TMA_FLAT, json.dumps(cases), bench], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    for (_m, n, warps), r in zip(cases, json.loads(done.stdout.strip().splitlines()[-1]), strict=True):
        nb = -(-((n + 510) // 256) // warps)  # box rows a row can touch, ceil((n + 255) / 256), in boxes of W
        assert r["copies"] == 5 * nb and r["per_thread_copies"] == 0, r
        assert r["vec_stores"] >= 3 * nb, r  # each slot's output loop stores its NB boxes a vector at a time
        assert 3 * nb * warps * 512 <= r["shared"] <= 3 * nb * warps * 512 + 1024, r
