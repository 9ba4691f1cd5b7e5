"""The `kernelproof` command line, run as a user would: a real subprocess, real files, real exit codes (usage errors
also in this process, where each would otherwise pay an interpreter start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.cli.progress import CaseLines
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.report.models import CaseResult, Report
from kernelproof_core.tasks import CaseSet
from tests.candidates.rms_norm_variants import source

ROOT = Path(__file__).resolve().parents[2]


def kp(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "kernelproof_core", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
    )


def test_list_shows_every_task_signature_and_cases() -> None:
    r = kp("list", "--case-set", "interpreter")
    assert r.returncode == 0, r.stderr
    for name in ("rms_norm", "swiglu", "softmax"):
        assert f"\n{name}\n" in f"\n{r.stdout}"
    assert "candidate(x: Tensor[M, N], weight: Tensor[N], eps: float)" in r.stdout
    assert "tail127" in r.stdout and "gpt_oss_2880" in r.stdout



def test_a_reader_that_is_gone_ends_the_listing_quietly() -> None:
    """`kernelproof list | head -1` once head has exited: stdout is a pipe nobody reads (closed here before the CLI
    starts, so every write fails); the CLI ends with 128 + SIGPIPE and no traceback, as a shell tool does."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "kernelproof_core", "list"], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT, env=env)
    finally:
        os.close(write_end)
    assert r.returncode == 141, r.stderr
    assert r.stderr == ""

def test_verify_passing_candidate_writes_reports(tmp_path: Path) -> None:
    cand = tmp_path / "good.py"
    cand.write_bytes(source("honest"))
    out, md, lines = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "sub" / "cases.jsonl"
    r = kp("verify", "--task", "rms_norm", "--candidate", str(cand), "--device", "interpreter", "--no-sandbox",
           "--case", "tail127", "--case", "strided", "--dtype", "bf16", "--dtype", "float32",
           "--repeats", "2", "--output", str(out), "--markdown", str(md), "--cases-jsonl", str(lines))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict: pass" in r.stdout
    report = Report.model_validate_json(out.read_text())
    assert [c.verdict.value for c in report.cases] == ["pass"] * 4
    assert report.isolation.sandboxed is False and "--no-sandbox" in (report.isolation.note or "")
    assert report.candidates[0].path == str(cand.resolve())
    assert md.read_text().startswith(f"# KernelProof report `{report.run_id}`")
    assert "[  4/4]" in r.stderr  # progress lines
    progress = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 4  # interpreter timings are labelled, with no speed ratio to misread
    assert all(line.endswith("(interpreter wall-clock, unrewarded)") and " x " not in line for line in progress)
    # each finished case as a JSON line, the report's own CaseResult, as it finished
    logged = [CaseResult.model_validate_json(line) for line in lines.read_text().splitlines()]
    assert sorted((c.case_id, c.dtype) for c in logged) == sorted((c.case_id, c.dtype) for c in report.cases)
    assert {c.case_id: c.verdict for c in logged} == {c.case_id: c.verdict for c in report.cases}


@pytest.mark.parametrize("device", ["interpreter", "auto"])
def test_an_interpreter_run_needs_no_interpreter_flag_in_the_environment(tmp_path: Path, device: str) -> None:
    """`verify --device interpreter --no-sandbox` (or auto without CUDA) from a shell without TRITON_INTERPRET=1: the
    command switches itself to the interpreter before Triton is imported, so an honest kernel passes (it was a
    runtime_error on every case, Triton's own helpers built in compiled mode: the harness's fault blamed on the
    candidate); a process that imported Triton compiled gets a usage error from the pipeline, no verdict."""
    if device == "auto" and torch.cuda.is_available():
        pytest.skip("auto means cuda here")
    cand = tmp_path / "good.py"
    cand.write_bytes(source("honest"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, "-m", "kernelproof_core", "verify", "--task", "rms_norm", "--candidate",
                        str(cand), "--device", device, "--no-sandbox", "--case", "tail127", "--dtype", "float32",
                        "--repeats", "2", "--output", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0 and "verdict: pass" in r.stdout, r.stdout + r.stderr
    script = ("import triton\nfrom kernelproof_core.errors import UsageError\n"
              "from kernelproof_core.pipeline import prepare_device\n"
              "try:\n    prepare_device('interpreter')\nexcept UsageError as e:\n    print('usage:', e)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0 and "usage: this process imported Triton in compiled mode" in r.stdout, r.stdout + r.stderr


def test_case_lines_are_on_disk_as_each_case_finishes(tmp_path: Path) -> None:
    """A run cut short before its report is written (a time box, a kill) keeps the cases it finished: each line is
    flushed when its case ends, not when the run does."""
    campaign = Campaign(device="interpreter", dtypes=["float32", "bfloat16"], case_set=CaseSet.INTERPRETER,
                        case_ids=["tail127"], samples=2, warmups=1, invocations_per_sample=1)
    cases = verify_candidate(CandidateJob(task="rms_norm", source=source("honest")), campaign).cases
    assert len(cases) == 2
    path = tmp_path / "cases.jsonl"
    log = CaseLines(path)
    for case in cases:
        log.case_done(case)
        written = path.read_text().splitlines()  # read while the run is still going: the file is not closed yet
        assert CaseResult.model_validate_json(written[-1]) == case
    assert len(path.read_text().splitlines()) == 2
    log.close()


def test_verify_with_a_noise_target_records_the_rule(tmp_path: Path) -> None:
    cand = tmp_path / "good.py"
    cand.write_bytes(source("honest"))
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    r = kp("verify", "--task", "rms_norm", "--candidate", str(cand), "--device", "interpreter", "--no-sandbox",
           "--case", "tail127", "--repeats", "2", "--target-rse", "0.005", "--max-measure-s", "10", "--quiet",
           "--output", str(out), "--markdown", str(md))
    assert r.returncode == 0, r.stdout + r.stderr
    report = Report.model_validate_json(out.read_text())
    assert report.config.stopping is not None and report.config.stopping.target_rse == 0.005
    assert report.config.stopping.max_measure_s == 10
    (case,) = report.cases
    assert case.timing is not None and case.timing.stopped_by == "fixed_count"  # the interpreter keeps its count
    assert "## Achieved bandwidth" in md.read_text()


def test_verify_failing_candidate_exits_2(tmp_path: Path) -> None:
    cand = tmp_path / "bad.py"
    cand.write_bytes(source("tail_bug"))
    out = tmp_path / "r.json"
    r = kp("verify", "--task", "rms_norm", "--candidate", str(cand), "--device", "interpreter", "--no-sandbox",
           "--case", "tail127", "--no-measure", "--output", str(out), "--quiet")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "verdict: tolerance" in r.stdout and "first failure: tolerance" in r.stdout
    assert json.loads(out.read_text())["summary"]["reward"] == -1.0
    assert r.stderr == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_a_harness_that_cannot_start_exits_4_without_a_verdict(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An infrastructure fault before any case (here the profiler self-test's ProfilerGap, injected where the
    in-process run prepares its process) is exit 4 with the reason, not a traceback and not a candidate verdict."""
    from kernelproof_core import pipeline
    from kernelproof_core.cli import main
    from kernelproof_core.integrity.profiled import ProfilerGap

    def no_profiler(campaign: object) -> None:
        raise ProfilerGap("the profiler's record holds 0 of the harness's 2 canary launches")

    monkeypatch.setattr(pipeline, "prepare_process", no_profiler)
    code = main(["run", "--task", "rms_norm", "--device", "interpreter", "--no-sandbox", "--quiet"])
    assert code == 4
    assert "infrastructure fault, no verdict: ProfilerGap" in capsys.readouterr().err


def test_cuda_unavailable_exits_3(tmp_path: Path) -> None:
    r = kp("run", "--task", "rms_norm", "--device", "cuda", "--no-sandbox")
    assert r.returncode == 3
    assert "no CUDA device" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--task", "no_such_task", "--device", "interpreter"),
        ("verify", "--task", "rms_norm", "--candidate", "/nonexistent.py", "--device", "interpreter"),
        ("run", "--dtype", "int8", "--device", "interpreter"),
        ("run", "--warmups", "lots"),
        ("run", "--device", "interpreter", "--max-measure-s", "10"),  # needs --target-rse
        ("run", "--device", "interpreter", "--target-rse", "0"),
        ("run", "--device", "interpreter", "--overlap", "0"),
        ("run", "--device", "interpreter", "--overlap", "2", "--no-sandbox"),  # only sandboxed children can be held
        ("run", "--task", "rms_norm", "--device", "interpreter", "--case", "n1", "--case", "n1_typo"),
        ("run", "--task", "softmax", "--device", "interpreter", "--case", "gpt_oss_2880"),  # rms_norm's, not softmax's
        ("run", "--device", "interpreter", "--output", "/proc/kernelproof/r.json"),  # cannot be written
        ("run", "--device", "interpreter", "--markdown", "/tmp"),  # a directory
        ("frobnicate",),
    ],
)
def test_usage_errors_exit_64(args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (the entry point's own exit code is the subprocess test below): one interpreter start a
    case would be most of this test's time."""
    from kernelproof_core.cli import main

    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 64, out + err
    assert "verdict" not in out  # refused before anything was verified
    assert "error" in err


@pytest.mark.parametrize("args", [("frobnicate",), ("run", "--dtype", "int8", "--device", "interpreter")])
def test_usage_errors_exit_64_from_the_command(args: tuple[str, ...]) -> None:
    r = kp(*args)
    assert r.returncode == 64, r.stdout + r.stderr
    assert "verdict" not in r.stdout and "error" in r.stderr


def test_run_overlapped_verifies_every_task_at_once_in_the_sandbox(tmp_path: Path) -> None:
    """`--overlap 3`: the three built-ins verified at once (sandbox/overlap.py), each sandboxed, in task order."""
    out = tmp_path / "r.json"
    r = kp("run", "--task", "all", "--device", "interpreter", "--case", "tail127", "--repeats", "2", "--overlap", "3",
           "--output", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    report = Report.model_validate_json(out.read_text())
    assert [(c.task, c.verdict.value) for c in report.cases] == [
        ("rms_norm", "pass"), ("swiglu", "pass"), ("softmax", "pass")]
    assert all(c.timing is not None for c in report.cases)
    assert report.isolation.sandboxed is True
    assert "[  3/3]" in r.stderr
