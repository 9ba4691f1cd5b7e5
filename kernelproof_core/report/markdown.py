"""The Markdown audit report: derived from a Report object only, never from anything else."""

from __future__ import annotations

from kernelproof_core.report.models import CaseResult, Report, Timing
from kernelproof_core.verdicts import VERDICT_INFO


def _f(value: float | None, fmt: str = ".2f") -> str:
    return "–" if value is None else format(value, fmt)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(cols: list[str]) -> list[str]:
    return [_row(cols), _row(["---"] * len(cols))]


def render_markdown(report: Report) -> str:
    """A human-readable audit of one run: summary, environment, isolation, every case, every failure."""
    s, env, cfg = report.summary, report.environment, report.config
    lines = [
        f"# KernelProof report `{report.run_id}`",
        "",
        f"- **Verdict:** `{s.verdict.value}` — {s.cases_passed}/{s.cases_total} cases passed",
        f"- **Reward** (`{s.reward_spec}`): {_f(s.reward, '+.4f')} — aggregate rule: {s.aggregate_rule}",
    ]
    if s.reward_note:
        lines.append(f"- **Reward note:** {s.reward_note}")
    if s.geomean_speedup is not None:
        lines.append(f"- **Geometric-mean speedup over the eager baseline:** {s.geomean_speedup:.3f}x")
    lines += [
        f"- **Created:** {report.created_at.isoformat()} ({report.duration_s:.1f} s)",
        f"- **Command:** `{cfg.command}` tasks={', '.join(cfg.tasks)} dtypes={', '.join(cfg.dtypes)} "
        f"device={cfg.device} case set={cfg.case_set} seed={cfg.seed}",
        f"- **Measurement plan:** {_plan(report)}",
        "",
        "## Environment",
        "",
        f"- Host `{env.hostname}`, {env.platform}; Python {env.python}, torch {env.torch}, triton {env.triton}, "
        f"CUDA {env.cuda or '–'}; harness `{env.harness_version}`",
    ]
    if env.gpu is not None:
        g = env.gpu
        lines.append(
            f"- GPU {g.name} (sm_{g.capability.replace('.', '')}, {g.sm_count} SMs, "
            f"{g.memory_bytes / 2**30:.0f} GiB, L2 {_f((g.l2_bytes or 0) / 2**20, '.0f')} MiB), driver "
            f"{g.driver or '–'}, SM clock {g.sm_clock_mhz or '–'} MHz, memory clock {g.mem_clock_mhz or '–'} MHz, "
            f"{g.temperature_c or '–'} °C (max SM clock {g.max_sm_clock_mhz or '–'} MHz, power limit "
            f"{_f(g.power_limit_w, '.0f')} W); measured copy bandwidth {_f(g.copy_bandwidth_gbps, '.0f')} GB/s"
        )
    else:
        lines.append("- No GPU: Triton interpreter on the CPU. Timings are wall-clock and never rewarded.")
    iso = report.isolation
    lines += [
        "",
        "## Isolation",
        "",
        f"- Sandboxed: **{'yes' if iso.sandboxed else 'NO'}**; active layers: {', '.join(iso.layers) or 'none'}",
        f"- Missing layers: {', '.join(iso.missing_layers) or 'none'}",
    ]
    if iso.note:
        lines.append(f"- {iso.note}")
    lines += ["", "## Candidates", ""]
    lines += _header(["task", "origin", "path", "sha256", "bytes"])
    for c in report.candidates:
        lines.append(_row([c.task, c.origin, f"`{c.path or '–'}`", f"`{c.source_sha256[:16]}`", str(c.size_bytes)]))
    lines += ["", "## Cases", "", *_case_table(report), *_bandwidth_table(report), *_sampling_table(report),
              *_failures(report)]
    return "\n".join(lines) + "\n"


def _plan(report: Report) -> str:
    cfg = report.config
    if not cfg.measure:
        return f"{cfg.warmups} warm-ups (measurement disabled)"
    calls = f"{cfg.invocations_per_sample} invocations"
    if cfg.stopping is None or cfg.device != "cuda":
        return f"{cfg.warmups} warm-ups, {cfg.samples} samples x {calls}"
    r = cfg.stopping
    return (f"{cfg.warmups} warm-ups, samples of {calls} until both medians' relative standard error is at most "
            f"{r.target_rse:.2%} (at least {r.min_samples} samples and {r.min_measured_s:g} s measured; at most "
            f"{r.max_samples} samples or {r.max_measure_s:g} s)")


def _sol_fraction(report: Report, t: Timing | None) -> float | None:
    """The case's own speed-of-light fraction; for reports without one, against the environment's copy bandwidth."""
    if t is None or t.achieved_bandwidth_gbps is None:
        return None
    if t.speed_of_light_fraction is not None:
        return t.speed_of_light_fraction
    sol = report.environment.gpu.copy_bandwidth_gbps if report.environment.gpu else None
    return t.achieved_bandwidth_gbps / sol if sol else None


def _case_table(report: Report) -> list[str]:
    cols = ["task", "dtype", "case", "shape", "verdict", "max abs err", "rel L2", "cand µs (events)",
            "cand µs (kernel)", "base µs (events)", "base µs (kernel)", "speedup", "GB/s", "% SOL", "cv", "reward"]
    lines = _header(cols)
    for c in report.cases:
        t = c.timing
        gbps = t.achieved_bandwidth_gbps if t else None
        lines.append(_row([
            c.task, c.dtype, c.case_id, _shape(c), f"`{c.verdict.value}`",
            _f(c.error.max_abs if c.error else None, ".2e"), _f(c.error.rel_l2 if c.error else None, ".2e"),
            _f(t.candidate.median if t else None), _f(t.candidate_device_us if t else None),
            _f(t.baseline.median if t else None), _f(t.baseline_device_us if t else None),
            _f(t.speedup if t else None, ".3f"), _f(gbps, ".0f"),
            _f(_pct(_sol_fraction(report, t)), ".1f"), _f(t.candidate.cv if t else None, ".3f"),
            _f(c.reward.value if c.reward else None, "+.3f"),
        ]))
    if any(c.timing and c.timing.kind == "interpreter_wall_clock" for c in report.cases):
        lines += ["", "_Timings above are Triton-interpreter wall-clock on a CPU: labelled, never rewarded._"]
    return lines


def _shape(c: CaseResult) -> str:
    return "x".join(str(v) for v in c.dims.values())


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def _bandwidth_table(report: Report) -> list[str]:
    """Achieved bandwidth of every timed case: the speed-of-light view, device time (events) and kernel-only."""
    rows = [(c, c.timing) for c in report.cases if c.timing is not None]
    if not rows:
        return []
    refs = sorted({round(t.copy_bandwidth_gbps) for _, t in rows if t.copy_bandwidth_gbps})
    env = report.environment.gpu.copy_bandwidth_gbps if report.environment.gpu else None
    ref = ", ".join(f"{r} GB/s" for r in refs) or (f"{env:.0f} GB/s (environment)" if env else "not measured")
    lines = ["", "## Achieved bandwidth", "",
             f"Speed of light = device copy bandwidth, the better of the verifying process's quick probe and the "
             f"environment's measurement: {ref}. Bytes moved are the "
             "task's minimum; events is the candidate's device-time median with launches hidden (what the reward "
             "sees), kernel time is CUPTI kernel time, launch-inclusive is the median of ungated samples, launch "
             "overhead is launch-inclusive minus kernel time. Launch-inclusive samples taken after an earlier "
             "case's CUPTI pass in the same process include CUPTI's per-launch callbacks: an upper bound "
             "(docs/METHODOLOGY.md).", ""]
    lines += _header(["task", "dtype", "case", "shape", "MB moved", "cand µs (events)", "cand µs (kernel)",
                      "cand µs (launch-incl.)", "launch overhead µs", "GB/s (events)", "GB/s (kernel)",
                      "% SOL (events)", "% SOL (kernel)", "speedup vs baseline"])
    for c, t in rows:
        kernel_sol = t.speed_of_light_fraction_kernel
        if kernel_sol is None and t.kernel_bandwidth_gbps is not None and env:
            kernel_sol = t.kernel_bandwidth_gbps / env
        lines.append(_row([
            c.task, c.dtype, c.case_id, _shape(c), _mb(t.min_bytes), _f(t.candidate.median),
            _f(t.candidate_device_us),
            _f(t.candidate_launch_inclusive.median if t.candidate_launch_inclusive else None),
            _f(t.launch_overhead_us), _f(t.achieved_bandwidth_gbps, ".0f"),
            _f(t.kernel_bandwidth_gbps, ".0f"), _f(_pct(_sol_fraction(report, t)), ".1f"),
            _f(_pct(kernel_sol), ".1f"), _f(t.speedup, ".3f"),
        ]))
    if any(t.kind == "interpreter_wall_clock" for _, t in rows):
        lines += ["", "_Interpreter rows: wall-clock on a CPU, so no bandwidth or speed of light._"]
    return lines


def _sampling_table(report: Report) -> list[str]:
    """How each case's sampling ended and what the clocks did (NVML; – where unavailable)."""
    rows = [(c, c.timing) for c in report.cases if c.timing is not None]
    if not rows:
        return []
    lines = ["", "## Sampling and clocks", "",
             "Samples are kept/taken per implementation; a pair is discarded when the SM clock fell below 90% "
             "(default) of its value after the warm-ups or NVML reported a thermal or power slowdown. Exposed: "
             "candidate samples the host may not have fully queued before the GPU ran them (launch gate); long tail: "
             "candidate samples whose device synchronize came late after the end event (host wake-up or deferred "
             "work). Launched: how a sample's calls reached the GPU, replayed from a CUDA graph or one by one on the "
             "stream (the timing note says why).", ""]
    lines += _header(["task", "dtype", "case", "launched", "stopped by", "samples kept/taken", "RSE cand %",
                      "RSE base %",
                      "throttled pairs", "exposed", "long tail", "host µs/call", "SM MHz start", "SM MHz min–max",
                      "mem MHz", "°C"])
    for c, t in rows:
        clocks = f"{t.sm_clock_mhz_min}–{t.sm_clock_mhz_max}" if t.sm_clock_mhz_min is not None else "–"
        lines.append(_row([
            c.task, c.dtype, c.case_id, t.sample_launch or "–", f"`{t.stopped_by}`", f"{t.candidate.count}/{t.samples}",
            _f(_pct(t.candidate_rse), ".2f"), _f(_pct(t.baseline_rse), ".2f"),
            _i(t.throttled_samples), _i(t.launch_exposed_samples), _i(t.deferred_samples),
            _f(t.candidate_host_us_per_call, ".1f"), _i(t.sm_clock_mhz_start), clocks, _i(t.mem_clock_mhz_start),
            _i(t.temperature_c_start),
        ]))
    return lines


def _mb(nbytes: int) -> str:
    mb = nbytes / 1e6
    return f"{mb:.1f}" if mb >= 1 else f"{mb:.3g}"


def _i(value: int | None) -> str:
    return "–" if value is None else str(value)


def _failures(report: Report) -> list[str]:
    failed = [c for c in report.cases if c.failure is not None]
    if not failed:
        return []
    lines = ["", "## Failures", ""]
    for c in failed:
        assert c.failure is not None
        lines.append(f"- **{c.task} / {c.dtype} / {c.case_id}**: `{c.failure.code.value}` "
                     f"({VERDICT_INFO[c.failure.code].description}) — {c.failure.message}")
        if c.failure.detail:
            lines += ["", "  ```", *("  " + ln for ln in c.failure.detail.strip().splitlines()[-12:]), "  ```"]
    return lines
