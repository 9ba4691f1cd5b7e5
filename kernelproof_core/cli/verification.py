"""`kernelproof list`, `run` and `verify`: the local verification commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelproof_core.cli.exit_codes import ExitCode, exit_code_for
from kernelproof_core.cli.progress import CaseLines, Fanout, ProgressPrinter
from kernelproof_core.errors import DeviceUnavailable, InfraError, UsageError
from kernelproof_core.interpreter import interpret_if_asked

if TYPE_CHECKING:
    from kernelproof_core.pipeline import PipelineEvents


def register(sub: Any) -> None:
    p_list = sub.add_parser("list", help="tasks, signatures, dtypes and cases")
    p_list.add_argument("--case-set", choices=["full", "interpreter"], default="full")
    p_list.add_argument("--seed", type=int, default=0, help="seed of the randomized cases shown")
    p_list.set_defaults(handler=cmd_list)

    p_run = sub.add_parser("run", help="verify and time the built-in candidates (the seed campaign)")
    p_run.add_argument("--task", default="all", help="task name or 'all'")
    _campaign_options(p_run)
    p_run.set_defaults(handler=cmd_run)

    p_verify = sub.add_parser("verify", help="verify a candidate file")
    p_verify.add_argument("--task", required=True)
    p_verify.add_argument("--candidate", required=True, type=Path, help="Python file defining candidate(...)")
    _campaign_options(p_verify)
    p_verify.set_defaults(handler=cmd_verify)


def _campaign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", action="append", dest="dtypes", help="bfloat16|float16|float32 (repeatable)")
    p.add_argument("--device", choices=["auto", "cuda", "interpreter"], default="auto")
    p.add_argument("--case-set", choices=["full", "interpreter"], default=None,
                   help="default: full on CUDA, interpreter under the Triton interpreter")
    p.add_argument("--case", action="append", dest="case_ids", help="only this case id (repeatable)")
    p.add_argument("--warmups", type=int, default=None)
    p.add_argument("--repeats", type=int, default=None, help="timing samples")
    p.add_argument("--iterations-per-sample", type=int, default=None)
    p.add_argument("--no-measure", action="store_true", help="correctness gates only")
    stop = p.add_argument_group("adaptive stopping (CUDA; replaces --repeats; see docs/METHODOLOGY.md)")
    stop.add_argument("--target-rse", type=float, default=None,
                      help="sample until both medians' relative standard error is below this (e.g. 0.005)")
    stop.add_argument("--min-samples", type=int, default=None, help="samples before the target may stop (20)")
    stop.add_argument("--max-samples", type=int, default=None, help="samples at most (5000)")
    stop.add_argument("--min-measured-s", type=float, default=None, help="timed seconds before the target may stop")
    stop.add_argument("--max-measure-s", type=float, default=None, help="wall-clock cap on one case's sampling (30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, help="write the JSON report here")
    p.add_argument("--markdown", type=Path, help="write the Markdown audit report here")
    p.add_argument("--cases-jsonl", type=Path, metavar="PATH",
                   help="each finished case's result as a JSON line, written as it ends (kept if a run is cut)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run candidate code in this process (trusted local debugging; labelled in the report)")
    p.add_argument("--overlap", type=int, default=1, metavar="N",
                   help="verify up to N candidates at once on one device, every timed phase exclusive (sandbox only)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def cmd_list(args: argparse.Namespace) -> int:
    from kernelproof_core.tasks import TASKS, CaseSet

    out = sys.stdout
    for task in TASKS.values():
        info = task.info
        out.write(f"{info.name}\n  signature: {info.signature}\n  math:      {info.math}\n")
        out.write(f"  output:    {info.output}\n  dtypes:    {', '.join(info.dtypes)}\n")
        if info.notes:
            out.write(f"  notes:     {info.notes}\n")
        out.write(f"  cases ({args.case_set} set):\n")
        for case in task.cases(CaseSet(args.case_set), args.seed):
            extra = []
            if case.distribution != "normal":
                extra.append(f"dist={case.distribution}")
            if case.row_stride_pad:
                extra.append(f"row_stride_pad={case.row_stride_pad}")
            label = f"{case.case_id:<16} {case.kind.value:<10} {case.shape_label():<18}"
            out.write(f"    {label} {case.description}{' [' + ', '.join(extra) + ']' if extra else ''}\n")
        out.write("\n")
    return ExitCode.OK


def cmd_run(args: argparse.Namespace) -> int:
    interpret_if_asked(args.device)  # --no-sandbox verifies here: Triton's mode before the tasks import it
    from kernelproof_core.tasks import resolve_tasks

    try:
        tasks = resolve_tasks(args.task)
    except UsageError as exc:
        return _usage(str(exc))
    jobs = [(t.name, t.builtin_candidate.read_bytes(), "builtin", str(t.builtin_candidate)) for t in tasks]
    return _execute(args, jobs, command="run")


def cmd_verify(args: argparse.Namespace) -> int:
    interpret_if_asked(args.device)  # as cmd_run
    from kernelproof_core.tasks import get_task

    try:
        get_task(args.task)
    except UsageError as exc:
        return _usage(str(exc))
    path: Path = args.candidate
    if not path.is_file():
        return _usage(f"candidate file not found: {path}")
    return _execute(args, [(args.task, path.read_bytes(), "file", str(path.resolve()))], command="verify")


def _usage(message: str) -> int:
    sys.stderr.write(f"kernelproof: error: {message}\n")
    return ExitCode.USAGE


def _execute(args: argparse.Namespace, jobs: list[tuple[str, bytes, str, str]], command: str) -> int:
    from kernelproof_core.campaign import CandidateJob
    from kernelproof_core.cli.campaign_args import campaign_from_args, check_case_ids
    from kernelproof_core.cli.report_files import check_writable, write_atomically
    from kernelproof_core.executors import make_executor
    from kernelproof_core.report.markdown import render_markdown
    from kernelproof_core.verify import run_verification

    try:
        campaign = campaign_from_args(args)
        check_case_ids(campaign, [task for task, *_ in jobs])
        check_writable(args.output, args.markdown, args.cases_jsonl)
    except DeviceUnavailable as exc:
        sys.stderr.write(f"kernelproof: {exc}\n")
        return ExitCode.DEVICE_UNAVAILABLE
    except (UsageError, ValueError) as exc:
        return _usage(str(exc))
    candidate_jobs = [
        CandidateJob(task=task, source=source, origin=origin, filename=filename)
        for task, source, origin, filename in jobs
    ]
    if args.overlap < 1:
        return _usage("--overlap must be at least 1")
    if args.overlap > 1 and args.no_sandbox:
        return _usage("--overlap needs the sandbox: in-process candidates cannot be held at phase boundaries")
    executor = make_executor(sandbox=not args.no_sandbox, overlap=min(args.overlap, len(candidate_jobs)))
    targets: list[PipelineEvents] = []
    if not args.quiet:
        targets.append(ProgressPrinter(sys.stderr, campaign, [j.task for j in candidate_jobs]))
    lines = CaseLines(args.cases_jsonl) if args.cases_jsonl is not None else None
    if lines is not None:
        targets.append(lines)
    try:
        report = run_verification(candidate_jobs, campaign, executor, command=command,
                                  events=Fanout(*targets) if targets else None)
    except InfraError as exc:  # the harness could not start (e.g. its profiler self-test): nothing about the candidate
        sys.stderr.write(f"kernelproof: infrastructure fault, no verdict: {type(exc).__name__}: {exc}\n")
        return ExitCode.INFRA
    finally:
        executor.close()
        if lines is not None:
            lines.close()
    displaced = False
    for path, render in ((args.output, lambda: report.model_dump_json(indent=2)),
                         (args.markdown, lambda: render_markdown(report))):
        if path is not None and (written := write_atomically(path, render())) != path:
            sys.stderr.write(f"kernelproof: could not write {path}; the report is in {written}\n")
            displaced = True
    s = report.summary
    reward = "n/a" if s.reward is None else f"{s.reward:+.4f}"
    sys.stdout.write(
        f"verdict: {s.verdict.value}  cases: {s.cases_passed}/{s.cases_total} passed  reward: {reward}"
        f"{'  (' + s.reward_note + ')' if s.reward_note else ''}\n"
    )
    if s.first_failure is not None:
        sys.stdout.write(f"first failure: {s.first_failure.code.value}: {s.first_failure.message}\n")
    return ExitCode.INFRA if displaced else exit_code_for(s.verdict)
