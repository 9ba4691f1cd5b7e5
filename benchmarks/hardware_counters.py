"""Hardware counters of the built-in kernels (Nsight Compute), on the shapes where they fall short of copy speed.

Events and CUPTI say how long a kernel takes; the counters say why: DRAM bytes actually moved (re-reads show up as
more than the task's minimum), DRAM throughput against its peak, achieved occupancy, how busy the schedulers are and
what warps wait on. One `ncu` process per shape (`--clock-control none`: the card's clocks are left alone), each
profiling only the kernels of one call of the built-in (between cudaProfilerStart and cudaProfilerStop), after
untraced warm-up calls (compiles and plan caches stay out). ncu replays each kernel once per counter pass with
caches flushed in between, so its durations are single cold runs under the profiler, read beside the events, not
instead of them.

    python benchmarks/hardware_counters.py --output-dir DIR [--shape softmax:2048x32768 ...] [--ncu PATH]

A shape is TASK:MxN or TASK:MxN+PAD (rows padded by PAD elements), optionally followed by @NAME=VALUE,... to set
plan constants of the task's kernel module in the profiled process only (softmax:1024x65536@_RESIDENT_KEEP=True:
an unshipped option's counters beside the shipped plan's, both in one run). Or sweep:FAMILY:MxN:LABEL, one trial
of a kernel_sweep.py family (bf16, its label with spaces written as _, e.g.
sweep:softmax_pipeline_local:2048x32768:copy_warps=16_ctas=132): an experiment's counters, after the family's own
correctness checks of the trials before it. DIR gets one details CSV per shape
(ncu's own output) and counters.json (the summary printed as a table). Needs CUDA and ncu (on the H200 image under
/opt/nvidia/nsight-compute); without them it says so and exits 0.

--source adds, per shape, a second ncu pass with warp-state sampling (SourceCounters) and its source page as SASS
(NAME.source.csv, ncu's own output): where in the kernel the warps wait, instruction by instruction, which the
per-kernel stall ratios cannot say. counters.json gets each kernel's most sampled instructions and its samples by
opcode (source_summary); where ncu's page has other columns than expected, the summary lists the ones it found.
"""

from __future__ import annotations

import argparse
import ast
import csv
import glob
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The fixed seed-campaign softmax cases below 90% of copy in the last campaigns, and three at or above it as yardsticks.
DEFAULT_SHAPES = [
    "softmax:2048x32000", "softmax:2048x32768", "softmax:1024x65536", "softmax:1024x131072", "softmax:512x128256",
    "softmax:1723x25249", "softmax:1991x33508", "softmax:8192x8192", "swiglu:4096x14336", "rms_norm:8192x8192",
]
SECTIONS = ["SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "SchedulerStats", "WarpStateStats"]
STALLS = ["long_scoreboard", "barrier", "lg_throttle", "mio_throttle", "short_scoreboard", "wait", "math_pipe_throttle",
          "not_selected", "selected", "dispatch_stall", "no_instruction", "drain", "membar", "branch_resolving",
          "sleeping"]
# Instruction pipes whose share of their peak says whether the arithmetic, not the memory, is the limit: xu is the
# MUFU (exponentials, reciprocals; benchmarks/sass_counts.py counts 1.0-2.6 an element in the resident softmax), fma
# and alu the float and integer work, lsu the loads and stores (global and shared).
PIPES = ["xu", "fma", "alu", "lsu"]


def _pipe_metric(pipe: str) -> str:
    return f"sm__inst_executed_pipe_{pipe}.avg.pct_of_peak_sustained_active"


METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum", "smsp__inst_executed.sum",
           "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct"] + [
    f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS] + [
    _pipe_metric(p) for p in PIPES]
WARMUP_CALLS = 3


def parse_trial(text: str) -> tuple[str, str, int, int, str]:
    """sweep:FAMILY:MxN:LABEL -> (task of the family, family, M, N, label with spaces as _)."""
    _, family, dims, label = [*text.split(":", 3), "", "", ""][:4]
    task = next((t for t in ("softmax", "rms_norm", "swiglu") if family.startswith(t)), "")
    m, _, n = dims.partition("x")
    if not task or not m.isdigit() or not n.isdigit() or not label:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected sweep:FAMILY:MxN:LABEL, FAMILY of softmax, "
                                         "rms_norm or swiglu")
    return task, family, int(m), int(n), label


def parse_shape(text: str) -> tuple[str, int, int, int]:
    if text.startswith("sweep:"):
        task, _, m, n, _ = parse_trial(text)
        return task, m, n, 0
    task, _, dims = text.partition(":")
    dims, _, pad = dims.partition("@")[0].partition("+")
    m, _, n = dims.partition("x")
    if task not in ("softmax", "rms_norm", "swiglu") or not m.isdigit() or not n.isdigit():
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected TASK:MxN[+PAD], TASK softmax, rms_norm or swiglu")
    return task, int(m), int(n), int(pad or 0)


def plan_options(text: str) -> dict[str, Any]:
    """The @NAME=VALUE,... part of a shape: kernel-module constants (names starting with _, values Python literals)."""
    if text.startswith("sweep:"):
        return {}
    _, _, spec = text.partition("@")
    options: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        name, eq, value = item.partition("=")
        if not eq or not name.startswith("_") or not name.isidentifier():
            raise argparse.ArgumentTypeError(f"shape {text!r}: plan option {item!r} is not _NAME=VALUE")
        try:
            options[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise argparse.ArgumentTypeError(f"shape {text!r}: {value!r} is not a Python literal") from None
    return options


def min_bytes(task: str, m: int, n: int, elsize: int) -> int:
    """The task's minimum traffic: each input read once, the output written once."""
    reads = {"softmax": m * n, "rms_norm": m * n + n, "swiglu": 2 * m * n}[task]
    return (reads + m * n) * elsize


def trial_call(text: str) -> Any:
    """The launch of a kernel_sweep.py family's trial named by sweep:FAMILY:MxN:LABEL (the family builds its inputs
    and checks every trial it yields up to that one)."""
    import kernel_sweep

    _, family, m, n, label = parse_trial(text)
    if family not in kernel_sweep.FAMILIES:
        raise SystemExit(f"kernel_sweep.py has no family {family}")
    labels = []
    for _kind, shape, name, launch, _moved, _chosen in kernel_sweep.FAMILIES[family](torch.device("cuda"),
                                                                                     torch.bfloat16):
        if shape == (m, n):
            labels.append(name.replace(" ", "_"))
            if labels[-1] == label:
                return launch
    raise SystemExit(f"{family} has no trial {label} at {m}x{n} (its trials there: {', '.join(labels)})")


def child(shape: str) -> None:
    """Run inside ncu: warm-up calls untraced, then one call between cudaProfilerStart and cudaProfilerStop."""
    from kernelproof_core.kernels import rms_norm, softmax, swiglu

    if shape.startswith("sweep:"):
        _profile(trial_call(shape))
        return
    task, m, n, pad = parse_shape(shape)
    module = {"softmax": softmax, "rms_norm": rms_norm, "swiglu": swiglu}[task]
    for name, value in plan_options(shape).items():
        if not hasattr(module, name):
            raise SystemExit(f"{module.__name__} has no {name}")
        setattr(module, name, value)
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rows() -> torch.Tensor:
        full = torch.randn((m, n + pad), device="cuda", dtype=torch.bfloat16, generator=gen)
        return full[:, :n]

    call: Any
    if task == "softmax":
        x = rows()
        call = lambda: softmax.candidate(x)  # noqa: E731
    elif task == "rms_norm":
        x, w = rows(), torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
        call = lambda: rms_norm.candidate(x, w, 1e-6)  # noqa: E731
    else:
        g, u = rows(), rows()
        call = lambda: swiglu.candidate(g, u)  # noqa: E731
    _profile(call)


def _profile(call: Any) -> None:
    for _ in range(WARMUP_CALLS):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()  # cudaProfilerStart: ncu runs with --profile-from-start off
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def find_ncu(given: str | None) -> str | None:
    if given:
        return given
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda*/bin/ncu"))
    return candidates[-1] if candidates else None


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summarize(details_csv: str, task: str, m: int, n: int) -> list[dict[str, Any]]:
    """Per profiled kernel: the chosen metrics (by their ncu names). Bytes over the minimum compares each kernel's
    DRAM traffic with the whole task's minimum: near 0 for a call's helper kernels (fills, tables)."""
    kernels: dict[str, dict[str, Any]] = {}
    lines = [line for line in details_csv.splitlines() if line.startswith('"')]
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        key = row.get("ID", "?")
        k = kernels.setdefault(key, {"kernel": row.get("Kernel Name", "?"), "grid": row.get("Grid Size"),
                                     "block": row.get("Block Size"), "metrics": {}})
        name, unit, value = row.get("Metric Name", ""), row.get("Metric Unit", ""), row.get("Metric Value", "")
        parsed = number(value)
        k["metrics"][name] = {"unit": unit, "value": value if parsed is None else parsed}
    out = []
    for k in kernels.values():
        met: dict[str, dict[str, Any]] = k["metrics"]

        def val(name: str, met: dict[str, dict[str, Any]] = met) -> Any:
            return met.get(name, {}).get("value")

        read, write, ns = val("dram__bytes_read.sum"), val("dram__bytes_write.sum"), val("gpu__time_duration.sum")
        unit_scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
        if isinstance(read, float):
            read *= unit_scale.get(met["dram__bytes_read.sum"]["unit"], 1)
        if isinstance(write, float):
            write *= unit_scale.get(met["dram__bytes_write.sum"]["unit"], 1)
        if isinstance(ns, float):
            ns *= {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(met["gpu__time_duration.sum"]["unit"], 1)
        stalls = {s: val(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio") for s in STALLS}
        out.append({
            "kernel": k["kernel"], "grid": k["grid"], "block": k["block"],
            "duration_us": ns / 1e3 if isinstance(ns, float) else None,
            "dram_read_bytes": read, "dram_write_bytes": write,
            "dram_bytes_over_minimum": (read + write) / min_bytes(task, m, n, 2)
            if isinstance(read, float) and isinstance(write, float) else None,
            "dram_throughput_pct": val("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            "registers_per_thread": val("launch__registers_per_thread"),
            "achieved_occupancy_pct": val("sm__warps_active.avg.pct_of_peak_sustained_active"),
            "issue_active_pct": val("smsp__issue_active.avg.pct_of_peak_sustained_active"),
            "instructions": val("smsp__inst_executed.sum"),
            "l2_hit_pct": val("lts__t_sector_hit_rate.pct"),
            "stalls_per_issue": {s: v for s, v in stalls.items() if isinstance(v, float) and v >= 0.05},
            "pipe_pct": {p: v for p in PIPES if isinstance(v := val(_pipe_metric(p)), float)},
        })
    return out


def _column(fields: list[str], *words: str) -> str | None:
    """The first column whose name holds every word (case-insensitive)."""
    return next((f for f in fields if all(w.lower() in f.lower() for w in words)), None)


def summarize_source(page_csv: str, top: int = 25) -> dict[str, Any]:
    """ncu's source page (--page source --print-source sass --csv) in brief: the instructions with the most warp
    samples (their share of all samples, the stall reasons sampled most there) and the samples by opcode. The page is
    the record; this reads its "Source" column and the one counting every warp sample ("Warp Stall Sampling (All
    Samples)"), and per-reason columns where ncu writes them (names starting "stall_" or holding "Stall Reason")."""
    lines = [line for line in page_csv.splitlines() if line.startswith('"')]
    # ncu opens each kernel's table with a '"Kernel Name","NAME",' line; the table is the first one's, from its header.
    start = next((i for i, line in enumerate(lines) if line.startswith('"Address"')), 0)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith('"Kernel Name"')), len(lines))
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:end]))))
    fields = list(rows[0]) if rows else []
    source = _column(fields, "source")
    samples = _column(fields, "warp stall sampling", "all") or _column(fields, "sampling", "all")
    if not rows or source is None or samples is None:
        return {"error": "no source and sample columns", "columns": fields}
    reasons = [f for f in fields if (f.lower().startswith("stall_") or "stall reason" in f.lower())
               and "not issued" not in f.lower()]
    total = sum(number(r.get(samples, "") or "") or 0.0 for r in rows)
    instructions: list[dict[str, Any]] = []
    by_opcode: dict[str, float] = {}
    for r in rows:
        count = number(r.get(samples, "") or "") or 0.0
        text = (r.get(source) or "").strip()
        opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split(" ")[0]
        by_opcode[opcode] = by_opcode.get(opcode, 0.0) + count
        if count:
            why = sorted(((f, number(r.get(f, "") or "") or 0.0) for f in reasons), key=lambda x: -x[1])[:3]
            instructions.append({"address": r.get(_column(fields, "address") or "", ""), "source": text,
                                 "samples": count, "share": count / total if total else 0.0,
                                 "reasons": {f: v for f, v in why if v}})
    instructions.sort(key=lambda i: -float(i["samples"]))
    return {"samples": total, "top": instructions[:top],
            "by_opcode": dict(sorted(by_opcode.items(), key=lambda x: -x[1])[:20]), "reason_columns": reasons}


def source_pass(ncu: str, shape: str, out_dir: Path, stem: str, timeout: float) -> dict[str, Any]:
    """--source: one more ncu run of the shape with warp-state sampling into a report, its source page as SASS."""
    rep = out_dir / f"{stem}.source"
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--section", "SourceCounters",
           "--section", "WarpStateStats", "-f", "-o", str(rep), sys.executable, str(Path(__file__).resolve()),
           "--child", shape]
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if proc.returncode:
            return {"error": f"ncu rc={proc.returncode}", "stderr_tail": proc.stderr[-1500:]}
        page = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "source", "--csv", "--print-source",
                               "sass"], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"ncu timed out after {timeout:g} s"}
    (out_dir / f"{stem}.source.csv").write_text(page.stdout)
    if page.returncode:
        return {"error": f"ncu --import rc={page.returncode}", "stderr_tail": page.stderr[-1500:]}
    return summarize_source(page.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path)
    parser.add_argument("--shape", action="append", dest="shapes", type=str,
                        help="TASK:MxN[+PAD] (repeatable; default: DEFAULT_SHAPES)")
    parser.add_argument("--ncu", help="path of ncu (default: PATH, then /opt/nvidia/nsight-compute/*/ncu)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per shape")
    parser.add_argument("--source", action="store_true",
                        help="also sample warp states per SASS instruction (one more ncu run a shape)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    ncu = find_ncu(args.ncu)
    if not torch.cuda.is_available() or ncu is None:
        print(f"hardware_counters.py needs CUDA and ncu (CUDA: {torch.cuda.is_available()}, ncu: {ncu}); nothing run")
        return 0
    shapes = args.shapes or DEFAULT_SHAPES
    for s in shapes:
        parse_shape(s)
        plan_options(s)
    out_dir: Path = args.output_dir or Path("counters")
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for shape in shapes:
        task, m, n, _ = parse_shape(shape)
        stem = re.sub(r'[^A-Za-z0-9_.-]', '_', shape.replace('+', 'p'))
        log = out_dir / f"{stem}.csv"
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "details",
               "--log-file", str(log)] + [a for s in SECTIONS for a in ("--section", s)] + [
               "--metrics", ",".join(METRICS), sys.executable, str(Path(__file__).resolve()), "--child", shape]
        try:
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            results.append({"shape": shape, "error": f"ncu timed out after {args.timeout:g} s"})
            print(f"{shape}: ncu timed out", flush=True)
            continue
        text = log.read_text() if log.is_file() else ""
        kernels = summarize(text, task, m, n) if proc.returncode == 0 else []
        results.append({"shape": shape, "returncode": proc.returncode, "kernels": kernels,
                        "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""})
        if args.source:
            brief = results[-1]["source_summary"] = source_pass(ncu, shape, out_dir, stem, args.timeout)
            for i in brief.get("top", [])[:8]:
                print(f"{shape:<22} {i['share']:6.1%}  {i['source'][:60]:<60} {i['reasons']}", flush=True)
            if "error" in brief:
                print(f"{shape}: source pass {brief['error']} {brief.get('stderr_tail', '')}", flush=True)
        if proc.returncode or not kernels:
            print(f"{shape}: ncu rc={proc.returncode}, {len(kernels)} kernels\n{proc.stderr[-1500:]}\n{text[-800:]}",
                  flush=True)
        for k in kernels:
            top = sorted(k["stalls_per_issue"].items(), key=lambda x: -x[1])[:5]
            stalls = " ".join(f"{s}={v:.2f}" for s, v in top)
            pipes = " ".join(f"{p}={v:g}%" for p, v in k["pipe_pct"].items())
            print(f"{shape:<22} {k['kernel'][:28]:<28} {k['duration_us'] or 0:8.1f} us  "
                  f"dram {k['dram_throughput_pct']}%"
                  f"  bytes/min {k['dram_bytes_over_minimum'] or 0:.3f}  regs {k['registers_per_thread']}"
                  f"  occ {k['achieved_occupancy_pct']}%  issue {k['issue_active_pct']}%  pipes {pipes or '-'}"
                  f"  L2 hit {k['l2_hit_pct']}%"
                  f"  stalls/issue: {stalls}", flush=True)
        (out_dir / "counters.json").write_text(json.dumps({"benchmark": "hardware_counters", "ncu": ncu,
                                                          "sections": SECTIONS, "metrics": METRICS,
                                                          "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
