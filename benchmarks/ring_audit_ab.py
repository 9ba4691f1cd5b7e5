"""Ring audits on and off, side by side in one process: does keeping every output change what the pair measures?

Ring audits (KERNELPROOF_TIMING_RING_AUDITS, integrity.audit) keep every output of a sample so that any call can be
verified; a call then writes fresh memory instead of the block its predecessor just left in L2. On an H100 two
campaigns, one each way, had the built-in candidate 3-26% slower with them at the cases of 1-64 MB while the
baseline, which still reused its output block, did not move (evidence/h100/2026-12-05_funnel_ring_ab/). Since then
the baseline's outputs and the kernel-only passes are kept too (measurement.kept_outputs). This times the built-in
candidate against the eager baseline through the harness's own measure_cuda (CUDA graphs, launch gate, the task's
input ring, no auditor: only what keeping outputs does to the times), each case with ring audits off and on in
alternating order, and prints per case the candidate's and baseline's medians each way, their on/off ratios and
the speedup each way. On an H100 (evidence/h100/2026-12-05_ring_default/3_*) the candidate's medians and its kernel
time rose alike at 17-50 MB (its own writes reaching DRAM) while eager's moved 0-5%, and both were level at 134-268
MB; the same kernel on both sides is level (tests/gpu/test_gpu_graph_replay.py), so ring audits went on by default
(harness 0.7.0). Rerun it after changing measurement.kept_outputs or the graph capture.

    python benchmarks/ring_audit_ab.py --output ring_audit_ab.json [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.candidate import load_candidate
from kernelproof_core.measurement.timing import measure_cuda, ring_input_sets
from kernelproof_core.settings import get_settings
from kernelproof_core.tasks import Case, CaseSet, get_task

# Fixed cases of the full set: the mid-size ones where the H100 campaigns moved most, and 64 MB or more ones that did
# not move (task, case id).
CASES = [("rms_norm", "n1024"), ("rms_norm", "large_values"), ("rms_norm", "llama_4096"),
         ("swiglu", "tail1000"), ("swiglu", "large_values"), ("swiglu", "gpt_oss_2880"),
         ("softmax", "large_values"), ("softmax", "constant"), ("softmax", "attn_4096")]
QUICK = [("rms_norm", "n1024"), ("rms_norm", "llama_4096")]


def _case(task_name: str, case_id: str) -> Case:
    (case,) = [c for c in get_task(task_name).cases(CaseSet.FULL, 0) if c.case_id == case_id]
    return case


def _time(task: Any, fn: Any, sets: list[Any], ring_audits: bool, samples: int) -> dict[str, Any]:
    settings = get_settings()
    pair = measure_cuda(fn, task.baseline(), sets, warmups=5, samples=samples, invocations=100,
                        l2_flush_bytes=settings.l2_flush_bytes, profiler_invocations=20,
                        max_sample_ms=settings.max_sample_ms, ring_audits=ring_audits,
                        kept_outputs_max_bytes=settings.timing_kept_outputs_max_bytes)
    return {"candidate_us": pair.candidate.median, "baseline_us": pair.baseline.median,
            "candidate_kernel_us": pair.candidate_device_us or 0.0,
            "baseline_kernel_us": pair.baseline_device_us or 0.0,
            "candidate_calls": pair.invocations, "baseline_calls": pair.baseline_invocations,
            "sample_launch": pair.sample_launch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="two cases only")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--list", action="store_true", help="print the cases and the bytes each moves, then exit")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    cases = QUICK if args.quick else CASES
    if args.list:
        for task_name, case_id in cases:
            case = _case(task_name, case_id)
            mb = get_task(task_name).min_bytes(case, dtype) / 1e6
            print(f"{task_name} {case_id} {case.shape_label()} {mb:.1f} MB")
        return
    if not torch.cuda.is_available():
        print("ring_audit_ab.py needs CUDA (scripts/gpu-check runs it on the H200: stage ring_ab)")
        return
    settings = get_settings()
    device = torch.device("cuda")
    rows = []
    header = (f"{'case':<24} {'MB':>7} {'cand off':>9} {'cand on':>9} {'on/off':>7} {'base off':>9} {'base on':>9} "
              f"{'on/off':>7} {'speedup off':>11} {'on':>6} {'kernel on/off':>13}")
    print(header, flush=True)
    for i, (task_name, case_id) in enumerate(cases):
        task = get_task(task_name)
        case = _case(task_name, case_id)
        fn = load_candidate(task.builtin_candidate.read_bytes(), str(task.builtin_candidate)).fn
        first = task.make_inputs(case, dtype, device, torch.Generator().manual_seed(0))
        min_bytes = task.min_bytes(case, dtype)
        sets = ring_input_sets(task, first, min_bytes, settings)
        n_sets = len(sets)
        order = (False, True) if i % 2 == 0 else (True, False)  # alternate which goes first
        got = {mode: _time(task, fn, sets, mode, args.samples) for mode in order}
        off, on = got[False], got[True]
        row = {"task": task_name, "case": case_id, "dtype": args.dtype, "mb_moved": min_bytes / 1e6,
               "ring_sets": n_sets, "off": off, "on": on,
               "candidate_on_over_off": on["candidate_us"] / off["candidate_us"],
               "baseline_on_over_off": on["baseline_us"] / off["baseline_us"],
               "speedup_off": off["baseline_us"] / off["candidate_us"],
               "speedup_on": on["baseline_us"] / on["candidate_us"],
               "candidate_kernel_on_over_off": on["candidate_kernel_us"] / off["candidate_kernel_us"]
               if off["candidate_kernel_us"] else None}
        rows.append(row)
        kernel = row["candidate_kernel_on_over_off"]
        print(f"{task_name + ' ' + case_id:<24} {row['mb_moved']:>7.1f} {off['candidate_us']:>9.2f} "
              f"{on['candidate_us']:>9.2f} {row['candidate_on_over_off']:>7.3f} {off['baseline_us']:>9.2f} "
              f"{on['baseline_us']:>9.2f} {row['baseline_on_over_off']:>7.3f} {row['speedup_off']:>11.3f} "
              f"{row['speedup_on']:>6.3f} {kernel if kernel is None else round(kernel, 3)!s:>13}", flush=True)
        del sets, first
        torch.cuda.empty_cache()
    ratios = [r["speedup_on"] / r["speedup_off"] for r in rows]
    print(f"speedup on / off: {min(ratios):.3f}-{max(ratios):.3f} over {len(rows)} cases", flush=True)
    if args.output is not None:
        args.output.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
