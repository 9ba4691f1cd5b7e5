"""Reproducibility of the measurement: the same candidate verified N times, each in a fresh process.

Each run is a separate `python -m kernelproof_core verify ... --output run_K.json` process (sandboxed unless
`--no-sandbox`), so nothing is shared between runs but the machine: not the CUDA context, not the allocator, not the
compiled kernels in memory. Per case it reports:

  medians      the candidate's device-time median per call of each run (CUDA events, launches hidden: the reward
               input); the launch-inclusive medians and host time per call are reported beside them
  spread       max/min - 1 of those medians                    target on the H200: <= 1% (kernels >= 20 us)
  agreement    |event median / CUPTI kernel-only time - 1|, worst run   target on the H200: <= 3% (kernels >= 20 us)
  tiny cases   (kernel < 5 us) kernel time and launch overhead (launch-inclusive median - kernel time) shown
               separately

Targets are evaluated on CUDA only, for cases whose kernel-only time is >= 20 us; under the Triton interpreter the
timings are CPU wall clock and the script prints "interpreter: no targets".

    python benchmarks/reproducibility.py --output reproducibility.json [--device auto] [--runs 5] [--case ID ...]

Exit status: 0 when every run verified the candidate (pass on every case), 1 otherwise; with --strict also 3 when a
target is missed on CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.environment import resolve_device
from kernelproof_core.report.models import CaseResult, Report
from kernelproof_core.tasks import Task, get_task
from kernelproof_core.verdicts import Verdict

REPO = Path(__file__).resolve().parents[1]

# device -> (dtype, cases). On the H200 (rms_norm, bf16): n1 ~1.2 us and tail127 ~2.5 us of kernel time (tiny,
# launch-bound), gpt_oss_2880 ~26 us, llama_4096 ~34 us, llama_8192 ~67 us, big_8192 ~259 us
# (evidence/h200/seed_campaign_sandboxed/h200_run.json).
DEFAULTS: dict[str, tuple[str, list[str]]] = {
    "cuda": ("bfloat16", ["n1", "tail127", "gpt_oss_2880", "llama_4096", "llama_8192", "big_8192"]),
    "interpreter": ("float32", ["tail127", "llama_4096"]),
}
TARGET_KERNEL_US = 20.0  # targets apply to cases whose kernel-only time is at least this
TINY_KERNEL_US = 5.0  # below this: show kernel time and launch overhead separately
SPREAD_TARGET = 0.01
AGREEMENT_TARGET = 0.03


def verify_once(args: argparse.Namespace, device: str, dtype: str, cases: list[str], out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "kernelproof_core", "verify", "--task", args.task, "--candidate",
           str(args.candidate), "--device", device, "--dtype", dtype, "--seed", str(args.seed), "--quiet",
           "--output", str(out)]
    for case in cases:
        cmd += ["--case", case]
    for flag, value in (("--warmups", args.warmups), ("--repeats", args.samples),
                        ("--iterations-per-sample", args.invocations)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.no_sandbox:
        cmd.append("--no-sandbox")
    cmd += args.verify_args
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.run_timeout)
    wall = time.monotonic() - t0
    run: dict[str, Any] = {"command": cmd, "returncode": proc.returncode, "wall_s": wall,
                           "stdout_tail": proc.stdout[-2000:], "stderr_tail": proc.stderr[-2000:]}
    if out.is_file():
        report = Report.model_validate_json(out.read_text())
        run["report"] = report
    return run


def summarize_case(case_id: str, runs: Sequence[list[CaseResult] | None]) -> dict[str, Any]:
    """One case over independent verifications (each run's case results; None: the run left no report)."""
    medians: list[float | None] = []
    kernel: list[float | None] = []
    inclusive: list[float | None] = []
    host: list[float | None] = []
    verdicts: list[str | None] = []
    for cases in runs:
        result = next((c for c in cases if c.case_id == case_id), None) if cases is not None else None
        verdicts.append(result.verdict.value if result else None)
        timing = result.timing if result else None
        medians.append(timing.candidate.median if timing else None)
        kernel.append(timing.candidate_device_us if timing else None)
        li = timing.candidate_launch_inclusive if timing else None
        inclusive.append(li.median if li else None)
        host.append(timing.candidate_host_us_per_call if timing else None)
    row: dict[str, Any] = {"case_id": case_id, "verdicts": verdicts, "medians_us": medians,
                           "kernel_us_per_run": kernel, "launch_inclusive_us_per_run": inclusive,
                           "host_us_per_call_per_run": host}
    ok_medians = [m for m in medians if m is not None]
    complete = len(ok_medians) == len(runs) and all(v == Verdict.PASS.value for v in verdicts)
    row["complete"] = complete
    row["spread"] = max(ok_medians) / min(ok_medians) - 1 if ok_medians and min(ok_medians) > 0 else None
    ok_kernel = [k for k in kernel if k is not None]
    row["kernel_us"] = statistics.median(ok_kernel) if ok_kernel else None
    row["kernel_spread"] = max(ok_kernel) / min(ok_kernel) - 1 if ok_kernel and min(ok_kernel) > 0 else None
    ratios = [m / k - 1 for m, k in zip(medians, kernel, strict=True) if m is not None and k]
    row["event_over_cupti_minus_1"] = ratios
    # The same excess in microseconds per call: on the H200 the device's gap between back-to-back kernels.
    row["event_minus_cupti_us"] = [m - k for m, k in zip(medians, kernel, strict=True) if m is not None and k]
    row["agreement_worst"] = max((abs(r) for r in ratios), default=None)
    k_us = row["kernel_us"]
    row["class"] = ("no-cupti" if k_us is None else "long" if k_us >= TARGET_KERNEL_US
                    else "tiny" if k_us < TINY_KERNEL_US else "mid")
    ok_inclusive = [m for m in inclusive if m is not None]
    row["launch_inclusive_spread"] = max(ok_inclusive) / min(ok_inclusive) - 1 \
        if ok_inclusive and min(ok_inclusive) > 0 else None
    if k_us is not None and ok_inclusive:
        overheads = [m - k for m, k in zip(inclusive, kernel, strict=True) if m is not None and k is not None]
        row["launch_overhead_us_per_run"] = overheads
        row["launch_overhead_us"] = statistics.median(overheads) if overheads else None
    return row


def evaluate(rows: list[dict[str, Any]], device: str) -> dict[str, Any]:
    if device != "cuda":
        return {"evaluated": False, "note": "interpreter: no targets", "passed": None}
    checked = []
    for row in rows:
        if row["class"] != "long":
            row["targets"] = None
            continue
        spread_ok = row["spread"] is not None and row["spread"] <= SPREAD_TARGET
        agree_ok = row["agreement_worst"] is not None and row["agreement_worst"] <= AGREEMENT_TARGET
        row["targets"] = {"spread_ok": spread_ok, "agreement_ok": agree_ok}
        checked.append(row["case_id"])
    if not checked:
        return {"evaluated": False, "note": f"no case with kernel time >= {TARGET_KERNEL_US:g} us", "passed": None}
    passed = all(r["targets"]["spread_ok"] and r["targets"]["agreement_ok"] for r in rows if r["targets"])
    return {"evaluated": True, "cases": checked, "passed": passed}


def fmt(value: float | None, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def print_table(rows: list[dict[str, Any]], device: str) -> None:
    what = "device time, CUDA events, launches hidden" if device == "cuda" else "CPU wall clock, interpreter"
    print(f"{'case':<16}{'class':<9}{'kernel us':>10}{'spread':>9}{'|ev/cupti-1|':>14}  medians per run (us, {what})")
    for r in rows:
        medians = " ".join(fmt(m, ".2f") for m in r["medians_us"])
        spread = pct(r["spread"])
        agree = pct(r["agreement_worst"])
        verdict = "" if r["complete"] else f"  INCOMPLETE: verdicts {r['verdicts']}"
        targets = r.get("targets")
        mark = "" if not targets else ("  ok" if all(targets.values()) else
                                       "  MISS " + ",".join(k[:-3] for k, v in targets.items() if not v))
        print(f"{r['case_id']:<16}{r['class']:<9}{fmt(r['kernel_us'], '.2f'):>10}{spread:>9}{agree:>14}  "
              f"{medians}{mark}{verdict}")
    for r in rows:
        if r["event_minus_cupti_us"]:
            print(f"  {r['case_id']}: event median - CUPTI kernel time per call "
                  f"{' '.join(fmt(g, '.2f') for g in r['event_minus_cupti_us'])} us")
        if any(m is not None for m in r["launch_inclusive_us_per_run"]):
            print(f"  {r['case_id']}: launch-inclusive medians (reported, not rewarded) "
                  f"{' '.join(fmt(m, '.2f') for m in r['launch_inclusive_us_per_run'])} us, spread "
                  f"{pct(r['launch_inclusive_spread'])}; host time to queue a call "
                  f"{' '.join(fmt(m, '.1f') for m in r['host_us_per_call_per_run'])} us")
        if r["class"] == "tiny":
            print(f"  tiny {r['case_id']}: kernel {r['kernel_us']:.2f} us + launch overhead "
                  f"{fmt(r.get('launch_overhead_us'), '.2f')} us per call (launch-inclusive median - CUPTI kernel "
                  "time); the reward input is the device-time median")


def build_result(args: argparse.Namespace, device: str, task: Task, dtype: str, cases: list[str],
                 runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The benchmark's JSON over the runs so far."""
    reported = [run["report"].cases if run.get("report") else None for run in runs]
    rows = [summarize_case(case, reported) for case in cases]
    verdict = evaluate(rows, device)
    all_verified = all(r["complete"] for r in rows) and all(run["returncode"] == 0 for run in runs)
    first = next((run["report"] for run in runs if run.get("report")), None)
    result = {
        "benchmark": "reproducibility",
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.executable,
        "device": device,
        "task": task.name,
        "dtype": dtype,
        "candidate": str(args.candidate),
        "cases": cases,
        "runs": args.runs,
        "sandboxed": not args.no_sandbox,
        "environment": first.environment.model_dump(mode="json") if first else None,
        "isolation": first.isolation.model_dump(mode="json") if first else None,
        "campaign": first.config.model_dump(mode="json") if first else None,
        "thresholds": {"target_kernel_us": TARGET_KERNEL_US, "tiny_kernel_us": TINY_KERNEL_US,
                       "spread_max": SPREAD_TARGET, "agreement_max": AGREEMENT_TARGET},
        "per_case": rows,
        "targets": verdict,
        "all_verified": all_verified,
        "per_run": [
            {k: v for k, v in run.items() if k != "report"}
            | ({"verdict": run["report"].summary.verdict.value, "report_duration_s": run["report"].duration_s,
                "cases": [{"case_id": c.case_id, "verdict": c.verdict.value,
                           "timing": c.timing.model_dump(mode="json") if c.timing else None}
                          for c in run["report"].cases]} if run.get("report") else {})
            for run in runs
        ],
    }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "interpreter"])
    parser.add_argument("--task", default="rms_norm")
    parser.add_argument("--candidate", type=Path, help="candidate file (default: the task's built-in)")
    parser.add_argument("--dtype", help="default: bfloat16 on CUDA, float32 under the interpreter")
    parser.add_argument("--case", action="append", dest="cases", help="case id (repeatable; default: see DEFAULTS)")
    parser.add_argument("--runs", type=int, default=5, help="verifications, each in a fresh process")
    parser.add_argument("--warmups", type=int, help="passed to verify (default: verify's)")
    parser.add_argument("--samples", type=int, help="timing samples, verify --repeats (default: verify's)")
    parser.add_argument("--invocations", type=int, help="verify --iterations-per-sample (default: verify's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-sandbox", action="store_true", help="run verify --no-sandbox (trusted candidate)")
    parser.add_argument("--verify-arg", action="append", dest="verify_args", default=[],
                        help="extra verify argument (repeatable), e.g. --verify-arg=--target-rse --verify-arg=0.005")
    parser.add_argument("--run-timeout", type=float, default=900.0, help="seconds per verification process")
    parser.add_argument("--strict", action="store_true", help="exit 3 when a target is missed (CUDA)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2")
    device = resolve_device(args.device)
    task = get_task(args.task)
    args.candidate = (args.candidate or task.builtin_candidate).resolve()
    default_dtype, default_cases = DEFAULTS[device]
    dtype = args.dtype or default_dtype
    cases = args.cases or default_cases
    print(f"device={device} task={task.name} dtype={dtype} candidate={args.candidate} runs={args.runs} "
          f"cases={','.join(cases)} sandbox={'no' if args.no_sandbox else 'yes'}", flush=True)

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kp_repro_") as tmp:
        for k in range(args.runs):
            run = verify_once(args, device, dtype, cases, Path(tmp) / f"run_{k}.json")
            report = run.get("report")
            verdict = report.summary.verdict.value if report else "no report"
            print(f"run {k + 1}/{args.runs}: rc={run['returncode']} verdict={verdict} wall={run['wall_s']:.1f} s",
                  flush=True)
            if report is None or run["returncode"] != 0:
                print(run["stderr_tail"][-1500:], file=sys.stderr)
            runs.append(run)
            if args.output and len(runs) >= 2 and k + 1 < args.runs:  # a time-boxed run still leaves its numbers
                args.output.parent.mkdir(parents=True, exist_ok=True)
                partial = build_result(args, device, task, dtype, cases, runs) | {"partial": True}
                args.output.write_text(json.dumps(partial, indent=1))

    result = build_result(args, device, task, dtype, cases, runs)
    rows, verdict, all_verified = result["per_case"], result["targets"], result["all_verified"]
    print_table(rows, device)
    if not verdict["evaluated"]:
        print(verdict["note"])
    else:
        print(f"targets (cases with kernel >= {TARGET_KERNEL_US:g} us: spread <= {SPREAD_TARGET:.0%}, "
              f"|event/cupti - 1| <= {AGREEMENT_TARGET:.0%}): {'PASS' if verdict['passed'] else 'FAIL'}")
    print(f"all runs verified the candidate: {'yes' if all_verified else 'NO'}")

    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))
    if not all_verified:
        return 1
    if args.strict and verdict["passed"] is False:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
