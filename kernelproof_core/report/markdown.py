"""The Markdown audit report: derived from a Report object only, never from anything else."""

from __future__ import annotations

from kernelproof_core.report.models import CaseResult, Report
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
        f"- **Measurement plan:** {cfg.warmups} warm-ups, {cfg.samples} samples x "
        f"{cfg.invocations_per_sample} invocations" + ("" if cfg.measure else " (measurement disabled)"),
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
            f"{g.temperature_c or '–'} °C; measured copy bandwidth {_f(g.copy_bandwidth_gbps, '.0f')} GB/s"
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
    lines += ["", "## Cases", "", *_case_table(report), *_bandwidth_table(report), *_failures(report)]
    return "\n".join(lines) + "\n"


def _case_table(report: Report) -> list[str]:
    sol = report.environment.gpu.copy_bandwidth_gbps if report.environment.gpu else None
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
            _f(100 * gbps / sol if gbps and sol else None, ".1f"), _f(t.candidate.cv if t else None, ".3f"),
            _f(c.reward.value if c.reward else None, "+.3f"),
        ]))
    if any(c.timing and c.timing.kind == "interpreter_wall_clock" for c in report.cases):
        lines += ["", "_Timings above are Triton-interpreter wall-clock on a CPU: labelled, never rewarded._"]
    return lines


def _shape(c: CaseResult) -> str:
    return "x".join(str(v) for v in c.dims.values())


def _bandwidth_table(report: Report) -> list[str]:
    """Achieved bandwidth per task and shape, for cases of 1 MB or more (the speed-of-light view)."""
    rows = [c for c in report.cases if c.timing and c.timing.kind == "cuda_events" and c.timing.min_bytes >= 2**20]
    if not rows:
        return []
    sol = report.environment.gpu.copy_bandwidth_gbps if report.environment.gpu else None
    lines = ["", "## Achieved bandwidth (cases moving 1 MB or more)", "",
             f"Speed of light = measured device copy bandwidth: {_f(sol, '.0f')} GB/s.", ""]
    lines += _header(["task", "dtype", "case", "shape", "MB moved", "candidate GB/s", "% SOL", "eager GB/s",
                      "speedup vs eager"])
    for c in rows:
        t = c.timing
        assert t is not None
        gbps = t.achieved_bandwidth_gbps or 0.0
        eager = t.min_bytes / (t.baseline.median * 1e-6) / 1e9
        lines.append(_row([c.task, c.dtype, c.case_id, _shape(c), f"{t.min_bytes / 1e6:.1f}", f"{gbps:.0f}",
                           _f(100 * gbps / sol if sol else None, ".1f"), f"{eager:.0f}", f"{t.speedup:.3f}"]))
    return lines


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
