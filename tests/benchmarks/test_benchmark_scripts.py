"""Smoke tests of the benchmark scripts: reproducibility.py and throughput.py run as subprocesses under the Triton
interpreter with the smallest parameters, and their JSON output must have the expected structure; the CUDA-only
ones must at least import and decline."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def run_script(name: str, output: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / name), "--device", "interpreter",
                           "--output", str(output), *args], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "interpreter: no targets" in proc.stdout
    result: dict[str, Any] = json.loads(output.read_text())
    return result


def test_reproducibility_script(tmp_path: Path) -> None:
    r = run_script("reproducibility.py", tmp_path / "repro.json", "--runs", "2", "--case", "tail127",
                   "--samples", "2")
    assert r["benchmark"] == "reproducibility" and r["device"] == "interpreter" and r["runs"] == 2
    assert r["cases"] == ["tail127"] and r["all_verified"] is True
    assert r["environment"]["device"] == "interpreter" and r["campaign"]["samples"] == 2
    assert r["targets"] == {"evaluated": False, "note": "interpreter: no targets", "passed": None}
    [row] = r["per_case"]
    assert row["case_id"] == "tail127" and row["verdicts"] == ["pass", "pass"] and row["complete"] is True
    assert len(row["medians_us"]) == 2 and all(m > 0 for m in row["medians_us"])
    assert row["spread"] >= 0 and row["kernel_us"] is None and row["class"] == "no-cupti"
    assert len(r["per_run"]) == 2
    for run in r["per_run"]:
        assert run["returncode"] == 0 and run["verdict"] == "pass" and run["wall_s"] > 0
        assert [c["case_id"] for c in run["cases"]] == ["tail127"] and run["cases"][0]["timing"] is not None


def test_throughput_script(tmp_path: Path) -> None:
    r = run_script("throughput.py", tmp_path / "throughput.json", "--candidates", "2", "--case", "tail127",
                   "--samples", "2", "--overlap", "2", "--compare-precompile", "--fidelity-candidates", "2")
    assert r["benchmark"] == "throughput" and r["device"] == "interpreter" and r["preset"] == "quick"
    assert r["case_count"] == 1 and r["case_ids"] == ["tail127"] and r["campaign"]["samples"] == 2
    assert r["all_passed"] is True and r["failures"] == []
    assert r["distinct"]["distinct_cache_keys"] is True and r["distinct"]["distinct_source_hashes"] is True
    assert r["target"]["evaluated"] is False
    a, b = r["mode_a"], r["mode_b"]
    assert a["candidates"] == 2 and b["candidates"] == 2
    assert a["candidates_per_min"] > 0 and b["candidates_per_min"] > 0 and r["ratio_a_over_b"] > 0
    assert all(c["failures"] == [] for c in a["per_candidate"] + b["per_candidate"])
    c = r["mode_c"]
    assert c["width"] == 2 and c["candidates"] == 2 and c["candidates_per_min"] > 0 and c["exclusive_s"] > 0
    c0 = r["mode_c_no_precompile"]
    assert c["precompile"] is True and c0["precompile"] is False and c0["candidates"] == 2
    # The interpreter compiles nothing: no GPU target, so no precompile ran.
    assert all(x["precompile"] is None and x["compile_phase_s"] > 0 for x in c["per_candidate"] + c0["per_candidate"])
    hashes = [x["source_sha256"] for m in (a, b, c, c0) for x in m["per_candidate"]]
    assert len(set(hashes)) == 8  # four distinct streams
    # Mode F: 2 fidelity candidates, each after 2 quick jobs, on the same overlapped sandboxes; one row per case
    f = r["mode_f"]
    assert f["width"] == 2 and f["fidelity_candidates"] == 2 and f["quick_candidates"] == 4 and f["failures"] == []
    assert f["order"] == ["quick", "quick", "fidelity", "quick", "quick", "fidelity"]
    assert f["campaign"]["samples"] == 2 and f["campaign"]["dtypes"] == ["float32"]
    [row] = f["per_case"]
    assert row["case_id"] == "tail127" and row["verdicts"] == ["pass", "pass"] and row["complete"] is True
    assert len(row["medians_us"]) == 2 and all(m > 0 for m in row["medians_us"]) and row["spread"] >= 0
    assert f["targets"] == {"evaluated": False, "note": "interpreter: no targets", "passed": None}
    breakdown = a["median_breakdown_s"]
    for key in ("process_start_s", "child_startup_and_layers_s", "harness_setup_s", "candidate_load_s", "compile_s",
                "checks_s", "timing_s", "total_s"):
        assert key in breakdown
    assert breakdown["total_s"] > 0 and breakdown["compile_s"] > 0


@pytest.mark.parametrize("script", ["benchmarks/launch_overhead.py", "benchmarks/kernel_sweep.py",
                                    "benchmarks/hardware_counters.py",
                                    "scripts/timing_overhead_probe.py", "benchmarks/ring_audit_ab.py",
                                    "benchmarks/dependent_launch_gain.py"])
def test_cuda_only_scripts_import_and_decline_without_cuda(script: str) -> None:
    """Their numbers need a GPU (scripts/gpu-check runs them on the H200); here they must import the harness and the
    built-ins they drive, and say so instead of failing."""
    if torch.cuda.is_available():
        pytest.skip("CUDA present: scripts/gpu-check runs these")
    proc = subprocess.run([sys.executable, str(REPO / script)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "needs CUDA" in proc.stdout


def test_dependent_launch_gain_builds_differ_only_in_the_launch_and_the_wait() -> None:
    """The PDL benchmark's builds: `plain` is the honest source without the launch attribute, `wait` the honest
    source, `no_wait` the exploit (the same kernel without gdc_wait), `builtin` the shipped rms_norm with its _PDL
    switch off; its cases resolve in the full set."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import dependent_launch_gain as gain

    builds = {name: src.decode() for name, src in gain.builds().items()}
    pdl = '{"launch_pdl": True}'
    assert pdl not in builds["plain"] and pdl in builds["wait"] and pdl in builds["no_wait"]
    assert "gdc_wait()" in builds["plain"] and "gdc_wait()" in builds["wait"] and "gdc_wait()" not in builds["no_wait"]
    on, off = "_PDL, _PDL_MIN_BYTES = True,", "_PDL, _PDL_MIN_BYTES = False,"
    assert builds["builtin"] == builds["builtin_pdl"].replace(on, off) != builds["builtin_pdl"]
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks/dependent_launch_gain.py"), "--list"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [line.split()[1] for line in proc.stdout.splitlines()] == gain.CASES["rms_norm"]
    softmax = gain.builds("softmax")
    assert set(softmax) == {"builtin", "builtin_pdl"} and b"_PDL, _PDL_MIN_BYTES = False," in softmax["builtin"]
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks/dependent_launch_gain.py"), "--list", "--task",
                           "softmax"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and [line.split()[1] for line in proc.stdout.splitlines()] == gain.CASES["softmax"]


def test_ring_audit_ab_cases_resolve_on_both_sides_of_64_mb() -> None:
    """The A/B's cases are fixed cases of the full set (a renamed case would fail here, not on the GPU), some under
    64 MB moved (where the H100 campaigns differed) and some over (where they did not)."""
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks/ring_audit_ab.py"), "--list"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.endswith(" MB")]
    assert len(rows) == 9 and {r[0] for r in rows} == {"rms_norm", "swiglu", "softmax"}
    sizes = [float(r[-2]) for r in rows]
    assert sum(mb < 64 for mb in sizes) >= 5 and sum(mb >= 64 for mb in sizes) >= 3, rows


def test_hardware_counters_summarizes_a_source_page() -> None:
    """hardware_counters.summarize_source (--source) on a source page in the form ncu writes it (quoted CSV with a
    "Source" column of SASS and per-instruction warp samples; no ncu here): shares of all samples, the busiest
    instructions first with their top sampled reasons, samples by opcode with predicates stripped; the first kernel's
    table only, from its header (ncu opens each with a "Kernel Name" line); per-reason columns without their "(Not
    Issued)" duplicates; also on the real page from the H100; a page without those columns is reported with the
    columns it has, not summarized as empty."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import hardware_counters

    page = "\n".join([
        "==PROF== a line ncu prints before the table",
        '"Kernel Name","_softmax_resident",',
        '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
        '"stall_long_sb","stall_barrier","stall_long_sb (Not Issued)"',
        '"0x7f00","LDS.128 R32, [R3]","10","8","0","1","0"',
        '"0x7f10","@P0 LDG.E.U16 R113, desc[UR8][R26.64+0xc]","30","29","27","0","27"',
        '"0x7f20","MUFU.EX2 R5, R5","60","20","0","0","0"',
        '"0x7f30","BAR.SYNC.DEFER_BLOCKING 0x0","0","0","0","0","0"',
        '"Kernel Name","another_kernel",',
        '"Address","Source","Warp Stall Sampling (All Samples)"',
        '"0x9f00","FADD R1, R2, R3","500"',
    ])
    brief = hardware_counters.summarize_source(page, top=2)
    assert brief["samples"] == 100 and [i["source"][:4] for i in brief["top"]] == ["MUFU", "@P0 "]
    assert brief["top"][0]["share"] == 0.6 and brief["top"][1]["reasons"] == {"stall_long_sb": 27.0}
    assert brief["by_opcode"] == {"MUFU.EX2": 60.0, "LDG.E.U16": 30.0, "LDS.128": 10.0, "BAR.SYNC.DEFER_BLOCKING": 0.0}
    assert brief["reason_columns"] == ["stall_long_sb", "stall_barrier"]
    real = REPO / "evidence/h100/2026-12-06_sixteenth/1_counters_source_264x49196/counters/softmax_264x49196.source.csv"
    brief = hardware_counters.summarize_source(real.read_text(), top=1)  # as ncu wrote it on an H100
    assert brief["samples"] == 1903 and brief["top"][0]["source"].startswith("S2UR"), brief["top"]
    assert brief["by_opcode"]["MUFU.EX2"] == 520 and "stall_long_sb" in brief["reason_columns"]
    assert not any("Not Issued" in c for c in brief["reason_columns"])
    other = hardware_counters.summarize_source('"Address","Instructions Executed"\n"0x0","5"')
    assert other == {"error": "no source and sample columns", "columns": ["Address", "Instructions Executed"]}


def test_hardware_counters_reads_real_ncu_output() -> None:
    """hardware_counters.summarize on an Nsight Compute details CSV from the H200 (evidence/, written by ncu itself):
    the resident softmax kernel at 1024 x 131072, its counters in their units, bytes against the task's minimum."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import hardware_counters

    csv_path = REPO / "evidence/h200/2026-12-02_counters_fidelity/1_owed_counters/counters/softmax_1024x131072.csv"
    [k] = hardware_counters.summarize(csv_path.read_text(), "softmax", 1024, 131072)
    assert k["kernel"] == "_softmax_resident" and k["grid"] == "(132, 1, 1)" and k["block"] == "(1024, 1, 1)"
    assert k["dram_read_bytes"] == 269_340_928 and k["dram_write_bytes"] == 242_510_848
    assert abs(k["duration_us"] - 165.728) < 1e-9 and k["registers_per_thread"] == 64
    minimum = 2 * 1024 * 131072 * 2
    assert k["dram_bytes_over_minimum"] == (269_340_928 + 242_510_848) / minimum
    assert k["dram_throughput_pct"] == 64.2 and k["achieved_occupancy_pct"] == 50.53
    assert set(k["stalls_per_issue"]) >= {"mio_throttle", "barrier", "short_scoreboard"}
    assert k["pipe_pct"] == {}  # that run asked for no pipe metrics
    # the same run's rows with the pipe metrics ncu writes since (same columns, the metric named and valued)
    lines = csv_path.read_text().splitlines()
    row = next(line for line in lines if "issue_stalled_barrier_per_issue_active" in line)
    extra = [row.replace("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
                         f"sm__inst_executed_pipe_{p}.avg.pct_of_peak_sustained_active").replace('"inst","4.38"',
                                                                                                 f'"%","{v}"')
             for p, v in (("xu", "57.25"), ("fma", "31.5"), ("lsu", "n/a"))]
    [k] = hardware_counters.summarize("\n".join(lines + extra), "softmax", 1024, 131072)
    assert k["pipe_pct"] == {"xu": 57.25, "fma": 31.5}  # a value ncu could not give is left out, not zero
    assert all(v >= 0.05 for v in k["stalls_per_issue"].values())
    assert hardware_counters.parse_shape("softmax:1029x16655+3") == ("softmax", 1029, 16655, 3)
    keep = "softmax:1024x65536@_RESIDENT_KEEP=True,_RESIDENT_STREAM_WARPS=16"
    assert hardware_counters.parse_shape(keep) == ("softmax", 1024, 65536, 0)
    assert hardware_counters.plan_options(keep) == {"_RESIDENT_KEEP": True, "_RESIDENT_STREAM_WARPS": 16}
    assert hardware_counters.plan_options("softmax:1024x65536") == {}
    for bad in ("softmax:8x8@KEEP=1", "softmax:8x8@_KEEP", "softmax:8x8@_KEEP=yes"):
        with pytest.raises(argparse.ArgumentTypeError):
            hardware_counters.plan_options(bad)
    with pytest.raises(Exception, match="TASK:MxN"):
        hardware_counters.parse_shape("gemm:1x2")
    # A sweep family's trial: its task from the family's name, no plan options, the label kept whole (colons too).
    trial = "sweep:softmax_tma_parts:1024x65536:G=2_warps=16_boxes=1_ctas=132"
    assert hardware_counters.parse_shape(trial) == ("softmax", 1024, 65536, 0)
    assert hardware_counters.parse_trial(trial) == ("softmax", "softmax_tma_parts", 1024, 65536,
                                                    "G=2_warps=16_boxes=1_ctas=132")
    assert hardware_counters.plan_options(trial) == {}
    for bad in ("sweep:copy_rows:8x8:a", "sweep:softmax_x:8x8", "sweep:softmax_x:8by8:a"):
        with pytest.raises(argparse.ArgumentTypeError, match="sweep:FAMILY:MxN:LABEL"):
            hardware_counters.parse_shape(bad)


def test_file_evidence_compresses_big_reports_and_never_overwrites(tmp_path: Path) -> None:
    """scripts/file-evidence on what a device call brings back (a folder holding gpu-check's evidence.tar.gz and a
    log): the archive is unpacked in its place, machine-readable reports over 64 KiB are gzipped byte for byte,
    small ones, Markdown and CSV stay plain, and an existing destination is refused (evidence is never rewritten)."""
    import gzip
    import shutil
    import tarfile

    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts/file-evidence", root / "scripts/file-evidence")
    fetched, packed = tmp_path / "fetched", tmp_path / "packed"
    fetched.mkdir()
    packed.mkdir()
    big = json.dumps({"samples_us": [i / 7 for i in range(20000)]}).encode()
    (packed / "h200_run.json").write_bytes(big)
    (packed / "h200_run.md").write_text("x" * 100_000)
    (packed / "small.json").write_text("{}")
    with tarfile.open(fetched / "evidence.tar.gz", "w:gz") as tar:
        for f in packed.iterdir():
            tar.add(f, arcname=f.name)
    (fetched / "a.log").write_text("line\n" * 20000)
    script = str(root / "scripts/file-evidence")
    done = subprocess.run([script, str(fetched), "evidence/h200/x/1_run"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    dest = root / "evidence/h200/x/1_run"
    assert sorted(p.name for p in dest.iterdir()) == ["a.log.gz", "h200_run.json.gz", "h200_run.md", "small.json"]
    assert gzip.decompress((dest / "h200_run.json.gz").read_bytes()) == big
    assert (dest / "h200_run.md").read_text() == "x" * 100_000
    again = subprocess.run([script, str(fetched), "evidence/h200/x/1_run"], capture_output=True, text=True)
    assert again.returncode == 1 and "never overwritten" in again.stderr
    outside = subprocess.run([script, str(fetched), "elsewhere"], capture_output=True, text=True)
    assert outside.returncode == 2


def test_sass_counts_reads_the_planned_kernels_instruction_mix(tmp_path: Path) -> None:
    """sass_counts.py builds the H200 plans for sm_90 with no GPU and counts their SASS: the resident kernel (rows
    in shared memory) takes two exponentials an element, one in each pass (one under MAXFIRST), where the register
    kernel keeps its exponentials and takes about one (benchmarks/NOTES.md's status section reads these); its CTA
    barriers counted too. The build's counts and an ordinary row's (sass_counts.row_loop_opcodes) are both reported."""
    out = tmp_path / "sass.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sass_counts.py"), "--json", str(out),
                           "1024", "65536", "2048", "32768"], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resident, registers = json.loads(out.read_text())
    assert (resident["shape"], resident["kernel"]) == ("1024x65536", "_softmax_resident")
    assert (registers["shape"], registers["kernel"]) == ("2048x32768", "_softmax_realigned")
    for r in (resident, registers):
        assert r["instructions"] == sum(r["opcodes"].values()) > 500
        assert r["elements_a_thread"] == int(r["shape"].split("x")[1]) / (32 * r["meta"]["num_warps"])
        assert r["mufu_per_element"] == round(r["opcodes"]["MUFU"] / r["elements_a_thread"], 2)
    from kernelproof_core.kernels import softmax

    # what an ordinary row runs (rare redos and second looks stepped over): two exponentials an element (stats pass,
    # output pass), or one once MAXFIRST is planned
    assert resident["row_instructions"] <= resident["instructions"], resident
    assert 2.0 <= resident["row_mufu_per_element"] <= 2.5 or softmax._RESIDENT_MAXFIRST, resident
    assert 1.0 <= resident["row_mufu_per_element"] <= 1.2 or not softmax._RESIDENT_MAXFIRST, resident
    assert 1.0 <= registers["mufu_per_element"] <= 1.5, registers
    # FREE (planned): the resident kernel's barriers on a row are its reductions', not one or two a chunk
    assert resident["row_barriers"] <= 12 or not softmax._RESIDENT_FREE, resident
    assert "1024x65536" in proc.stderr and "MUFU" in proc.stderr and "CTA barriers" in proc.stderr


def test_time_over_copy_reads_a_committed_h200_campaign() -> None:
    """benchmarks/time_over_copy.py on the 0.7.0 H200 campaign (evidence/, written by the harness): each case's time
    over its copy-speed ideal against what 90% allows; rms_norm gpt_oss_2880 misses by 0.1 us, the 1 GB cases are at
    copy speed, and the report's own speed-of-light fraction is what the rows recompute."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import time_over_copy

    path = REPO / "evidence/h200/2026-12-05_pair_on_h200/3_campaign/h200_run.json.gz"
    report = time_over_copy.load(path)
    rows = {(r["task"], r["dtype"], r["case_id"]): r for r in time_over_copy.rows(report, min_mb=16)}
    assert all(r["mb"] >= 16 for r in rows.values()) and len(rows) > 40
    gpt = rows[("rms_norm", "bfloat16", "gpt_oss_2880")]
    assert 2.4 < gpt["allowed_us"] < gpt["over_us"] < 2.7 and 89 < gpt["pct_of_copy"] < 90
    assert abs(rows[("softmax", "bfloat16", "big_1024")]["over_us"]) < 1.0
    for case in report["cases"]:
        key = (case["task"], case["dtype"], case["case_id"])
        if key in rows:
            assert abs(rows[key]["pct_of_copy"] - 100 * case["timing"]["speed_of_light_fraction"]) < 1e-6
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks/time_over_copy.py"), str(path), "--task",
                           "softmax", "--min-mb", "64"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "long_65536" in proc.stdout and "rms_norm" not in proc.stdout.split("\n", 2)[2].rsplit("\n", 2)[0]
    # the bar over the whole report, as benchmarks/NOTES.md states it for this campaign: 37 of 52
    total, reached, missed = time_over_copy.bar(report)
    assert (total, reached) == (52, 37) and "rms_norm bfloat16 gpt_oss_2880" in missed
    assert "cases of 64 MB or more: 37 of 52" in proc.stdout


def test_baseline_kernels_load_beside_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/baseline-kernels writes each built-in kernel file at a revision, opened by a line naming it; the
    *_vs_baseline sweep families load such a file as a module of its own (a candidate is one file) whose candidate
    runs beside the library's: here HEAD's softmax (in a fresh clone, the revision under test's parent or itself),
    under the interpreter, on rows the library's candidate gives the same result for. A missing file is None."""
    if not (REPO / ".git").exists():  # the device tool's copy of the tree has no history to show
        pytest.skip("scripts/baseline-kernels reads git history: not a git checkout")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sweep_baseline

    from kernelproof_core.kernels import softmax

    proc = subprocess.run(["bash", str(REPO / "scripts" / "baseline-kernels"), "HEAD"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "KP_BASELINE_OUT": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    monkeypatch.setenv("KP_BASELINE_DIR", str(tmp_path))
    found = sweep_baseline.baseline("softmax")
    assert found is not None and found[1] == head.strip() and found[0] is not softmax
    x = torch.randn(6, 300, device="cuda" if torch.cuda.is_available() else "cpu") * 4  # compiled on a GPU
    torch.testing.assert_close(found[0].candidate(x), softmax.candidate(x), rtol=0, atol=0)
    assert sweep_baseline.baseline("no_such_kernel") is None


def test_hidden_draws_maps_the_large_hidden_cases_to_their_planned_kernels(tmp_path: Path) -> None:
    """hidden_draws.py draws many runs' hidden cases and plans the ones of 64 MB or more on the H200's topology: every
    task's profiles are there, each profile's plan shares add up to its share of large draws, the widest profiles
    reach 64 MB in a good part of the runs (softmax and swiglu `odd`, rms_norm `wide`) where the tiny ones never do,
    and the plans are the built-in's: padded rows past 32768 off cp.async's grid on the split path, contiguous rows
    off the vector grid on the resident kernel through windows, each with an example shape. The same seeds give the
    same survey."""
    out = tmp_path / "hidden.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, str(REPO / "benchmarks" / "hidden_draws.py"), "--seeds", "400", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert (r["seeds"], r["min_mb"], r["dtype"]) == (400, 64.0, "bfloat16")
    tasks = r["tasks"]
    assert set(tasks) == {"rms_norm", "swiglu", "softmax"}
    for profiles in tasks.values():
        for p in profiles.values():
            assert p["draws"] == 400 and 0.0 <= p["large_share"] <= 1.0
            assert abs(sum(p["plans"].values()) - p["large_share"]) < 1e-9 and set(p["examples"]) == set(p["plans"])
    soft = tasks["softmax"]
    assert soft["hidden_odd"]["large_share"] > 0.35 and tasks["swiglu"]["hidden_odd"]["large_share"] > 0.35
    assert tasks["rms_norm"]["hidden_wide"]["large_share"] > 0.1
    assert soft["hidden_tiny"]["large_share"] == 0.0 and not soft["hidden_tiny"]["plans"]
    assert any(k.startswith("softmax_split") and "padded" in k for k in soft["hidden_odd"]["plans"])
    assert any(k.startswith("softmax_resident [REALIGN") for k in soft["hidden_offset"]["plans"])
    assert any(k.startswith("rms_norm_resident [REALIGN") for k in tasks["rms_norm"]["hidden_wide"]["plans"])
    again = subprocess.run([*cmd[:-2], "--json", str(tmp_path / "again.json")], cwd=REPO, capture_output=True,
                           text=True, timeout=600, env=env)
    assert again.returncode == 0 and json.loads((tmp_path / "again.json").read_text()) == r
    assert "hidden_odd" in proc.stderr and "% of runs at >= 64 MB" in proc.stderr
