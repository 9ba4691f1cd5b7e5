"""What programmatic dependent launch (PDL) buys an rms_norm candidate in the harness's timing, honestly and not.

Three builds of one kernel (tests/adversarial/candidates): `plain` (no PDL), `wait` (launched with PDL, releases the
next call as it starts, executes griddepcontrol.wait before its loads: the honest form, an overlap of launch and
scheduling only) and `no_wait` (the exploit: PDL without the wait, so back-to-back timed calls overlap their memory
traffic too); and the shipped rms_norm with its `_PDL` switch off and on (`builtin`, `builtin_pdl`: the row kernel
launched with PDL and the wait, as shipped), whose gpt_oss_2880 case missed 90% of copy by 0.09 us without it.
Each is timed against the eager baseline through measure_cuda (CUDA graphs, launch gate, the task's input ring, ring
audits as configured), per case, and the script prints the medians, each build's CUPTI kernel time over its event
median, and the gains (GAINS: wait and no_wait over plain, builtin_pdl over builtin). Above 1.10 (+ 1 us) kernel
over events the harness calls a timing `tampering` (integrity/plausibility.py), so a `no_wait` gain under that line
is what the exploit collected before the dependent-launch probe (gate 7, integrity/dependent_launch.py). A
diagnostic: no target.

    python benchmarks/dependent_launch_gain.py --output dependent_launch_gain.json [--task rms_norm|softmax]
        [--dtype bfloat16] [--list] [--samples 30]

--task softmax times only the shipped softmax's two builds (its row and realigned kernels take the switch).
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
from kernelproof_core.integrity.plausibility import KERNEL_OVER_EVENTS_SLACK_US, MAX_KERNEL_OVER_EVENTS
from kernelproof_core.measurement.timing import measure_cuda, ring_input_sets
from kernelproof_core.settings import get_settings
from kernelproof_core.tasks import Case, CaseSet, get_task

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = REPO / "tests" / "adversarial" / "candidates"
HONEST = CANDIDATES / "honest" / "rms_norm_dependent_launch.py"
EXPLOIT = CANDIDATES / "dependent_launch_no_wait.py"
PDL_LAUNCH = 'extra = {"launch_pdl": True} if compiled else {}'
BUILTIN_SWITCH, BUILTIN_OFF = "_PDL, _PDL_MIN_BYTES = True,", "_PDL, _PDL_MIN_BYTES = False,"
# Per task: cases of 2 MB to 268 MB (rms_norm: the trio's kernel holds one row a program, no wide rows; softmax: the
# row and realigned kernels' cases nearest 90% of copy, long_32768 89.5% in fp16 at 0.7.0).
CASES = {"rms_norm": ["tail127", "n1024", "large_values", "gpt_oss_2880", "llama_4096", "llama_8192"],
         "softmax": ["large_values", "attn_4096", "vocab_32000", "long_32768", "random0"]}
# (build, the build it is compared with): the gains printed, where both builds run
GAINS = (("wait", "plain"), ("no_wait", "plain"), ("builtin_pdl", "builtin"))


def builds(task: str = "rms_norm") -> dict[str, bytes]:
    """The builds' sources: for rms_norm `plain` is the honest one with its launch attribute taken out (the wait and
    the release stay: both are no-ops without PDL), `wait` the honest one, `no_wait` the exploit; for every task
    `builtin_pdl` the shipped kernel (its _PDL switch on: launched with PDL and the wait) and `builtin` the same with
    the switch off."""
    builtin_path = REPO / "kernelproof_core" / "kernels" / f"{task}.py"
    builtin = builtin_path.read_text()
    checks = [(builtin_path, builtin, BUILTIN_SWITCH)]
    out: dict[str, bytes] = {}
    if task == "rms_norm":
        honest = HONEST.read_text()
        checks.append((HONEST, honest, PDL_LAUNCH))
        out = {"plain": honest.replace(PDL_LAUNCH, "extra = {}").encode(), "wait": honest.encode(),
               "no_wait": EXPLOIT.read_bytes()}
    for path, text, needle in checks:
        if needle not in text:
            raise SystemExit(f"{path.name} no longer holds {needle!r}: update this script")
    return {**out, "builtin": builtin.replace(BUILTIN_SWITCH, BUILTIN_OFF).encode(), "builtin_pdl": builtin.encode()}


def _case(task: str, case_id: str) -> Case:
    (case,) = [c for c in get_task(task).cases(CaseSet.FULL, 0) if c.case_id == case_id]
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--task", default="rms_norm", choices=sorted(CASES))
    parser.add_argument("--list", action="store_true", help="print the cases and the bytes each moves, then exit")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    task = get_task(args.task)
    sources = builds(args.task)
    if args.list:
        for case_id in CASES[args.task]:
            case = _case(args.task, case_id)
            print(f"{args.task} {case_id} {case.shape_label()} {task.min_bytes(case, dtype) / 1e6:.1f} MB")
        return
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        print("dependent_launch_gain.py needs CUDA on a GPU with programmatic dependent launch (sm_90 on)")
        return
    settings = get_settings()
    device = torch.device("cuda")
    fns = {name: load_candidate(src, f"{name}.py").fn for name, src in sources.items()}
    rows: list[dict[str, Any]] = []
    print(f"{'case':<14} {'MB':>7} " + " ".join(f"{n + ' us':>15} {'kern/ev':>7}" for n in fns)
          + "".join(f" {a + '/' + b:>20}" for a, b in GAINS if a in fns and b in fns), flush=True)
    pairs = [(a, b) for a, b in GAINS if a in fns and b in fns]
    for case_id in CASES[args.task]:
        case = _case(args.task, case_id)
        first = task.make_inputs(case, dtype, device, torch.Generator().manual_seed(0))
        min_bytes = task.min_bytes(case, dtype)
        sets = ring_input_sets(task, first, min_bytes, settings)
        got: dict[str, dict[str, float]] = {}
        for name, fn in fns.items():
            pair = measure_cuda(fn, task.baseline(), sets, warmups=5, samples=args.samples, invocations=100,
                                l2_flush_bytes=settings.l2_flush_bytes, profiler_invocations=20,
                                max_sample_ms=settings.max_sample_ms, ring_audits=settings.timing_ring_audits,
                                kept_outputs_max_bytes=settings.timing_kept_outputs_max_bytes)
            kernel = pair.candidate_device_us or 0.0
            got[name] = {"us": pair.candidate.median, "kernel_us": kernel, "baseline_us": pair.baseline.median,
                         "kernel_over_events": kernel / pair.candidate.median,
                         "tampering_line_us": MAX_KERNEL_OVER_EVENTS * pair.candidate.median
                         + KERNEL_OVER_EVENTS_SLACK_US, "sample_launch": pair.sample_launch}
        gains = {f"{a}/{b}": got[b]["us"] / got[a]["us"] for a, b in pairs}  # > 1: a is faster
        row = {"case": case_id, "shape": case.shape_label(), "mb_moved": min_bytes / 1e6, "builds": got,
               "gains": gains}
        rows.append(row)
        print(f"{case_id:<14} {row['mb_moved']:>7.1f} "
              + " ".join(f"{g['us']:>15.2f} {g['kernel_over_events']:>7.3f}" for g in got.values())
              + "".join(f" {v:>20.3f}" for v in gains.values()), flush=True)
        del sets, first
        torch.cuda.empty_cache()
    if args.output is not None:
        report = {"benchmark": "dependent_launch_gain", "device": torch.cuda.get_device_name(0), "task": args.task,
                  "dtype": args.dtype, "rows": rows}
        args.output.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
