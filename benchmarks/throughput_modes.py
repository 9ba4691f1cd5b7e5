"""The modes of benchmarks/throughput.py (its docstring says what each measures): A, a warm sandbox verifying one
candidate after another; B, a fresh process per candidate; C, overlapped sandboxes under the GPU arbiter; F,
timing fidelity under that overlap. Each returns its part of the JSON report.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reproducibility import AGREEMENT_TARGET, SPREAD_TARGET, TARGET_KERNEL_US, evaluate, print_table, summarize_case

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.report.models import CaseResult, Report
from kernelproof_core.sandbox import SandboxExecutor
from kernelproof_core.sandbox.arbiter import exclusive_windows
from kernelproof_core.sandbox.overlap import OverlappedExecutors
from kernelproof_core.verdicts import Verdict

REPO = Path(__file__).resolve().parents[1]
FIDELITY_QUICK_PER_JOB = 2  # mode F: quick-campaign jobs submitted per fidelity candidate


class PhaseClock:
    """PipelineEvents that stamps each phase and finished case with seconds since it was created."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.events: list[tuple[str, str | None, float]] = []

    def phase(self, name: str, case_id: str | None = None) -> None:
        self.events.append((name, case_id, time.monotonic() - self.t0))

    def case_done(self, result: CaseResult) -> None:
        self.events.append(("case_done", result.case_id, time.monotonic() - self.t0))


def timed_loop_estimate_s(cases: list[CaseResult]) -> float | None:
    """Lower bound of the time spent in timing loops: (warm-ups + samples) x invocations x (candidate + baseline
    median). It leaves out the CUPTI pass, L2 flushes, sample audits and input-ring set-up."""
    total = 0.0
    for case in cases:
        t = case.timing
        if t is None:
            return None
        calls = (t.warmups + t.samples) * t.invocations_per_sample
        total += calls * (t.candidate.median + t.baseline.median) * 1e-6
    return total


def breakdown(timings: dict[str, float], clock: PhaseClock, cases: list[CaseResult]) -> dict[str, float | None]:
    at = {k[3:-2]: v for k, v in timings.items() if k.startswith("at_")}

    def span(a: str, b: str) -> float | None:
        return at[b] - at[a] if a in at and b in at else None

    compile_s = checks_s = timing_s = 0.0
    first_case: float | None = None
    started: dict[str, float] = {}
    executing: dict[str, float] = {}
    measuring: dict[str, float] = {}
    for name, case_id, t in clock.events:
        if case_id is None:
            continue
        if name == "compile":
            started[case_id] = t
            first_case = t if first_case is None else first_case
        elif name == "execute":
            executing[case_id] = t
            compile_s += t - started.get(case_id, t)
        elif name == "measure" and case_id in executing:  # the pipeline's timed phase of the case begins
            measuring[case_id] = t
            checks_s += t - executing.pop(case_id)
        elif name == "case_done" and case_id in measuring:
            timing_s += t - measuring.pop(case_id)
        elif name == "case_done" and case_id in executing:
            checks_s += t - executing.pop(case_id)
    load_s = first_case - at["load"] if first_case is not None and "load" in at else None
    between = (at["done"] - at["load"] - (load_s or 0.0) - compile_s - checks_s - timing_s
               if "done" in at and "load" in at else None)
    estimate = timed_loop_estimate_s(cases)
    return {
        "process_start_s": at.get("hello"),
        "child_startup_and_layers_s": span("hello", "armed"),
        "job_handoff_s": span("armed", "prepare"),
        "harness_setup_s": span("prepare", "arm"),
        "cheat_check_arming_s": span("arm", "load"),
        "candidate_load_s": load_s,
        "compile_s": compile_s,
        "checks_s": checks_s,  # correctness gates and cheat checks after the first call
        "timing_s": timing_s,  # the measure phase: timing loop, CUPTI pass, audits
        "timed_loop_estimate_s": estimate,
        "between_cases_s": between,
        "finish_s": timings["total_s"] - at["done"] if "done" in at else None,
        "total_s": timings["total_s"],
    }


def failures(cases: list[CaseResult], expected: list[str]) -> list[str]:
    bad = [f"{c.case_id}: {c.verdict.value}" + (f" ({c.failure.message[:200]})" if c.failure else "")
           for c in cases if c.verdict is not Verdict.PASS]
    if sorted(c.case_id for c in cases) != sorted(expected):
        bad.append(f"cases {[c.case_id for c in cases]} != planned {expected}")
    return bad


def mode_a(jobs: list[CandidateJob], warmup: CandidateJob, campaign: Campaign) -> dict[str, Any]:
    executor = SandboxExecutor()
    expected = list(campaign.case_ids or [])
    try:
        t0 = time.monotonic()
        first = executor.execute(warmup, campaign)
        first_s = time.monotonic() - t0
        per: list[dict[str, Any]] = []
        started = time.monotonic()
        for i, job in enumerate(jobs):
            clock = PhaseClock()
            execution = executor.execute(job, campaign, clock)
            cases = execution.outcome.cases
            spans_s = breakdown(executor.last_timings, clock, cases)
            row = {"index": i, "source_sha256": execution.outcome.candidate.source_sha256,
                   "failures": failures(cases, expected), "breakdown": spans_s}
            per.append(row)
            spans = " ".join(f"{k.removesuffix('_s')}={v:.2f}" for k, v in spans_s.items()
                             if v is not None and k != "total_s")
            print(f"  A {i + 1}/{len(jobs)}: {'pass' if not row['failures'] else 'FAIL ' + str(row['failures'])} "
                  f"{executor.last_timings['total_s']:.2f} s ({spans})", flush=True)
        wall = time.monotonic() - started
    finally:
        executor.close()
    keys = per[0]["breakdown"].keys() if per else []
    medians = {k: statistics.median(v) if (v := [p["breakdown"][k] for p in per if p["breakdown"][k] is not None])
               else None for k in keys}
    print(f"  mode A: {len(jobs)} candidates in {wall:.1f} s = {60.0 * len(jobs) / wall:.1f} candidates/min",
          flush=True)
    return {
        "mode": executor.mode,
        "warmup_s": first_s,
        "warmup_failures": failures(first.outcome.cases, expected),
        "environment": first.environment.model_dump(mode="json"),
        "isolation": first.isolation.model_dump(mode="json"),
        "candidates": len(jobs),
        "wall_s": wall,
        "per_candidate_s": wall / len(jobs),
        "candidates_per_min": 60.0 * len(jobs) / wall,
        "median_breakdown_s": medians,
        "per_candidate": per,
    }


def compile_phase_s(clock: PhaseClock) -> float:
    """Wall seconds from each case's compile phase to its execute phase, summed (under overlap this includes time
    held at the boundary while another run is timed)."""
    started: dict[str, float] = {}
    total = 0.0
    for name, case_id, t in clock.events:
        if name == "compile" and case_id is not None:
            started[case_id] = t
        elif name == "execute" and case_id in started:
            total += t - started.pop(case_id)
    return total


def mode_c(jobs: list[CandidateJob], warmup: CandidateJob, campaign: Campaign, width: int,
           precompile: bool, shared: OverlappedExecutors | None = None) -> dict[str, Any]:
    """`width` warm sandboxes verifying at once under one GPU arbiter (timed phases exclusive); with `precompile`
    each job's kernels are built ahead in a GPU-less child (sandbox/precompiler.py). `shared`: run on these
    executors and leave them open (mode F goes on with them warm)."""
    runner = shared or OverlappedExecutors(width, precompile=precompile)
    expected = list(campaign.case_ids or [])
    clocks = [PhaseClock() for _ in jobs]
    try:
        t0 = time.monotonic()
        first = runner.execute_many([warmup] * width, campaign)
        warm_s = time.monotonic() - t0
        runner.precompiled.clear()
        started = time.monotonic()
        for clock in clocks:
            clock.t0 = started
        futures = [runner.submit(job, campaign, clock) for job, clock in zip(jobs, clocks, strict=True)]
        executions = [f.result() for f in futures]
        wall = time.monotonic() - started
        log = list(runner.arbiter.log)
        ahead = dict(runner.precompiled)
    finally:
        if shared is None:
            runner.close()
    per: list[dict[str, Any]] = []
    for i, (e, clock) in enumerate(zip(executions, clocks, strict=True)):
        bad = failures(e.outcome.cases, expected)
        sha = e.outcome.candidate.source_sha256
        pre = ahead.get(sha)
        per.append({"index": i, "source_sha256": sha, "failures": bad, "compile_phase_s": compile_phase_s(clock),
                    "precompile": None if pre is None else {
                        "seconds": pre.seconds, "calls": pre.calls, "failed": pre.failed, "files": len(pre.file_names),
                        "bytes": pre.size_bytes, "dropped_entries": pre.dropped_entries, "note": pre.note,
                        "launcher_errors": pre.launcher_errors}})
        print(f"  C {i + 1}/{len(jobs)}: {'pass' if not bad else f'FAIL {bad}'}; compile phases "
              f"{per[-1]['compile_phase_s']:.2f} s" + ("" if pre is None else
              f"; precompiled {pre.calls - len(pre.failed)}/{pre.calls} calls, {len(pre.file_names)} files, "
              f"{pre.size_bytes / 1e3:.0f} kB in {pre.seconds:.2f} s{' (' + pre.note + ')' if pre.note else ''}"
              f"{'; launcher errors: ' + '; '.join(pre.launcher_errors) if pre.launcher_errors else ''}"),
              flush=True)
    exclusive_s = sum(end - start for _, start, end in exclusive_windows(log) if start >= started)
    compile_median = statistics.median(r["compile_phase_s"] for r in per)
    label = "with compile-ahead" if precompile else "without compile-ahead"
    print(f"  mode C ({label}): {len(jobs)} candidates in {wall:.1f} s = {60.0 * len(jobs) / wall:.1f} "
          f"candidates/min (warm-up {warm_s:.1f} s, GPU held alone {exclusive_s:.1f} s, median compile phases "
          f"{compile_median:.2f} s per candidate)", flush=True)
    return {
        "width": width,
        "precompile": precompile,
        "median_compile_phase_s": compile_median,
        "warmup_s": warm_s,
        "warmup_failures": [f for e in first for f in failures(e.outcome.cases, expected)],
        "candidates": len(jobs),
        "wall_s": wall,
        "per_candidate_s": wall / len(jobs),
        "candidates_per_min": 60.0 * len(jobs) / wall,
        "exclusive_s": exclusive_s,  # time some run held the GPU alone (timing, arming)
        "per_candidate": per,
    }


def mode_f(fidelity_jobs: list[CandidateJob], quick_jobs: list[CandidateJob], runner: OverlappedExecutors,
           fidelity: Campaign, quick: Campaign, width: int, device: str) -> dict[str, Any]:
    """Timing fidelity under overlap: F distinct honest candidates (one kernel, distinct sources) verified on the
    fidelity cases with the standard sample plan, each in its own sandbox, submitted between quick-campaign jobs to
    `width` overlapped sandboxes with compile-ahead, so every fidelity job is timed while other runs compile and
    check. Their medians are F independent verifications of the same kernel: reproducibility.py's spread and
    event/CUPTI agreement, and its targets, over them. `runner`: mode C's executors, warm; closed here."""
    order: list[tuple[CandidateJob, Campaign]] = []
    quick_left = list(quick_jobs)
    for job in fidelity_jobs:
        order += [(quick_left.pop(0), quick) for _ in range(min(FIDELITY_QUICK_PER_JOB, len(quick_left)))]
        order.append((job, fidelity))
    order += [(job, quick) for job in quick_left]
    try:
        runner.precompiled.clear()
        started = time.monotonic()
        futures = [(campaign is fidelity, runner.submit(job, campaign)) for job, campaign in order]
        done = [(is_fidelity, f.result()) for is_fidelity, f in futures]
        wall = time.monotonic() - started
    finally:
        runner.close()
    case_lists = [e.outcome.cases for is_fidelity, e in done if is_fidelity]
    expected = list(fidelity.case_ids or [])
    bad = [f"F{i}: {b}" for i, cases in enumerate(case_lists) if (b := failures(cases, expected))]
    bad += [f"F quick {i}: {b}" for i, (is_fidelity, e) in enumerate(done)
            if not is_fidelity and (b := failures(e.outcome.cases, list(quick.case_ids or [])))]
    rows = [summarize_case(case, case_lists) for case in expected]
    targets = evaluate(rows, device)
    print(f"  mode F: {len(case_lists)} fidelity and {len(done) - len(case_lists)} quick candidates in {wall:.1f} s, "
          f"{width} at once", flush=True)
    print_table(rows, device)
    return {
        "width": width,
        "fidelity_candidates": len(case_lists),
        "quick_candidates": len(done) - len(case_lists),
        "order": ["fidelity" if campaign is fidelity else "quick" for _, campaign in order],
        "campaign": fidelity.public_dump(),
        "wall_s": wall,
        "thresholds": {"target_kernel_us": TARGET_KERNEL_US, "spread_max": SPREAD_TARGET,
                       "agreement_max": AGREEMENT_TARGET},
        "per_case": rows,
        "targets": targets,
        "failures": bad,
    }


def mode_b(paths: list[Path], args: argparse.Namespace, campaign: Campaign, out_dir: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    expected = list(campaign.case_ids or [])
    per: list[dict[str, Any]] = []
    started = time.monotonic()
    for i, path in enumerate(paths):
        out = out_dir / f"naive_{i}.json"
        cmd = [sys.executable, "-m", "kernelproof_core", "verify", "--task", args.task, "--candidate", str(path),
               "--device", campaign.device, "--seed", str(campaign.seed), "--warmups", str(campaign.warmups),
               "--repeats", str(campaign.samples), "--iterations-per-sample", str(campaign.invocations_per_sample),
               "--case-set", campaign.case_set.value, "--no-sandbox", "--quiet", "--output", str(out)]
        for dtype in campaign.dtypes:
            cmd += ["--dtype", dtype]
        for case in expected:
            cmd += ["--case", case]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.run_timeout)
        wall = time.monotonic() - t0
        row: dict[str, Any] = {"index": i, "returncode": proc.returncode, "wall_s": wall}
        if out.is_file():
            report = Report.model_validate_json(out.read_text())
            c = report.config
            same = (c.dtypes == campaign.dtypes and c.warmups == campaign.warmups and c.samples == campaign.samples
                    and c.invocations_per_sample == campaign.invocations_per_sample and c.seed == campaign.seed
                    and c.case_set == campaign.case_set.value and c.device == campaign.device)
            row |= {"report_duration_s": report.duration_s, "source_sha256": report.candidates[0].source_sha256,
                    "failures": failures(report.cases, expected) + ([] if same else ["campaign differs from A's"])}
        else:
            row["failures"] = [f"no report (rc={proc.returncode}): {proc.stderr[-800:]}"]
        per.append(row)
        print(f"  B {i + 1}/{len(paths)}: {'pass' if not row['failures'] else 'FAIL ' + str(row['failures'])} "
              f"{wall:.2f} s", flush=True)
    wall_total = time.monotonic() - started
    in_verify = [r["report_duration_s"] for r in per if "report_duration_s" in r]
    return {
        "candidates": len(paths),
        "wall_s": wall_total,
        "per_candidate_s": wall_total / len(paths),
        "candidates_per_min": 60.0 * len(paths) / wall_total,
        "median_process_wall_s": statistics.median(r["wall_s"] for r in per),
        "median_report_duration_s": statistics.median(in_verify) if in_verify else None,
        "per_candidate": per,
    }


