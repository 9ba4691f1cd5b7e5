"""The experiments' sm_90 builds have the structure each experiment exists to test (cluster launches, barriers,
16-byte accesses, cp.async copies, nothing in local memory), checked without a GPU: a kernel that compiled to
something else would make its H200 numbers say nothing about the idea. The timings are kernel_sweep.py's."""

from __future__ import annotations

from tests.sm90_build import compile_for_sm90

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
    shapes = [(1024, 65536, 16, 132), (1024, 40000, 8, 264)]
    results = compile_for_sm90(_COMPILE_WS, shapes)
    for (_m, n, warps, _p), r in zip(shapes, results, strict=True):
        assert r["cta_bars"] == 0, r
        assert set(r["partition_bars"]) <= {str(32 * warps), str(32 * (warps + 1))}, r
        assert r["noinc"] == -(-n // 4096) and r["wait_group"] == 0, r


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
    cases = [(65536, 4, 2), (131072, 8, 4), (32000, 2, 4)]
    results = compile_for_sm90(_COMPILE_CLUSTER, cases)
    for (_n, g, warps), r in zip(cases, results, strict=True):
        assert r["ctas"] == g and r["cluster"] and r["arrive"] == r["wait"] == 1 and r["rank_reads"] == 1, r
        assert r["stores"] == r["loads"] == r["part"] // (8 * 32 * warps), r


_COMPILE_RMS_RESIDENT = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_rms_resident as er
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, realign, free, table in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    per_sm = 2 if 2 * (n + 7 * realign) * 2 <= softmax._resident_budget(233472) else 1  # as er.rms_norm_resident
    _launch, meta = softmax._resident_plan(m, n, softmax._align(2, n), 2, 132, 233472, per_sm=per_sm,
                                           realign=realign, free=free, line=0)
    meta = {k: v for k, v in meta.items() if k not in ("CARRY", "KEEP", "HOLD", "ANCHOR")}  # softmax's options
    if table:
        meta["WT"] = meta["NCHUNK"] * 32 * meta["num_warps"] * meta["K"]
    with compile_only("cuda", 90, 32):
        k = er._rms_norm_resident.warmup(x, torch.empty(n, dtype=torch.bfloat16), torch.empty_like(x), m, n, n, 1e-6,
                                         **meta, grid=(1,))
    ptx = k.asm["ptx"]
    out.append({"nchunk": meta["NCHUNK"], "nres": meta["NRES"], "copies": len(re.findall(r"cp\\.async\\.c[ag]", ptx)),
                "vec_loads": len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)),
                "vec_stores": len(re.findall(r"st\\.global[^;]*\\.v4", ptx)), "local": ptx.count(".local"),
                "rsqrt": ptx.count("rsqrt"), "cta_bars": len(re.findall(r"bar\\.sync\\s+0;", ptx))})
print(json.dumps(out))
"""


def test_resident_rms_norm_compiles_to_copies_and_vector_accesses() -> None:
    """The resident rms_norm experiment (rows wider than 32768 in shared memory) built for the H200's target (no GPU
    needed; a fresh process): one 16-byte cp.async per thread per chunk in the prologue and again as each slot is
    refilled, the weight read and the output written 16 bytes wide (REALIGN: the weight from the shifted table; without
    it element by element), one rsqrt a row, nothing in local memory; FREE takes the barriers after the copy waits out.
    Numbers on the GPU: kernel_sweep.py --only rms_norm_resident."""
    shapes = [(1024, 65536, False, False, False), (1024, 40000, False, True, False), (425, 52717, True, False, False),
              (476, 63343, True, True, True), (476, 63343, True, False, True)]
    results = compile_for_sm90(_COMPILE_RMS_RESIDENT, shapes)
    for (_m, _n, realign, _free, table), r in zip(shapes, results, strict=True):
        assert r["nres"] == r["nchunk"] and r["copies"] == 2 * r["nchunk"], r
        assert r["local"] == 0 and r["rsqrt"] >= 1, r
        assert r["vec_stores"] == r["nchunk"], r  # y's whole vectors, 16 bytes wide (REALIGN: y's window)
        # the weight: a vector a chunk, but REALIGN without the table reads it at w[p - shift], element by element
        assert r["vec_loads"] == (0 if realign and not table else r["nchunk"]), r
    # FREE: no barrier after each chunk's wait (the row's reductions keep theirs)
    assert results[3]["cta_bars"] < results[4]["cta_bars"] - results[4]["nchunk"], results


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
    cases = [(65536, 8, 4, False), (52717, 8, 4, True), (24577, 4, 4, True), (40000, 4, 8, False)]
    results = compile_for_sm90(_COMPILE_RMS_CLUSTER, cases)
    for (_n, g, warps, realign), r in zip(cases, results, strict=True):
        assert r["ctas"] == g and r["arrive"] == r["wait"] == 1 and r["local"] == 0, r
        per_thread = r["part"] // (8 * 32 * warps)  # 16-byte vectors a thread
        assert r["vec_stores"] == per_thread and r["vec_loads"] == per_thread * (1 if realign else 2), r


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
    results = compile_for_sm90(_COMPILE_CLUSTER_SOFTMAX, cases)
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
