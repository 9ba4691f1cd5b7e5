"""The job process: where verification attempts run, never in the Celery worker or the API process itself.

    python -m worker.job_process RESULT_FD

It reads one JSON request per line on stdin (a JobSpec, where to write the report and a request id), runs the
verification, writes the report atomically to that path and answers one JSON line with the request id on RESULT_FD
(a private pipe, so nothing a candidate prints can forge an answer). It exits at end of input, after the requests
in flight. With KERNELPROOF_WORKER_OVERLAP = N > 1 (sandboxed requests only) it runs up to N requests at once
through one OverlappedExecutors, every timed phase exclusive on the GPU (kernelproof_core/sandbox/overlap.py);
answers then come in completion order. The worker keeps one such process warm per
worker when the sandbox is on (its fork server stays warm across jobs) and starts one per attempt without it
(in-process candidates must not share a process). It dies with its parent (PR_SET_PDEATHSIG), so a SIGKILLed
worker leaves no orphan holding the GPU.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelproof_core.campaign import Campaign, CandidateJob

log = logging.getLogger("kernelproof.job")
_PR_SET_PDEATHSIG = 1


class JobSpec(BaseModel):
    """Everything an attempt needs."""

    model_config = ConfigDict(extra="forbid")

    submission_id: str
    attempt_no: int
    job: CandidateJob
    campaign: Campaign
    sandbox: bool


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: JobSpec
    report_path: str
    request_id: str = "0"


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


class Executors:
    """One executor per sandbox flag, made on first use (thread-safe); overlapped when `overlap` > 1 and sandboxed."""

    def __init__(self, overlap: int) -> None:
        self.overlap = overlap
        self._made: dict[bool, Any] = {}
        self._lock = threading.Lock()

    def get(self, sandbox: bool) -> Any:
        from kernelproof_core.executors import make_executor

        with self._lock:
            if sandbox not in self._made:
                self._made[sandbox] = make_executor(sandbox, self.overlap if sandbox else 1)
            return self._made[sandbox]

    def close(self) -> None:
        for executor in self._made.values():
            executor.close()


def run_request(request: JobRequest, executors: Executors) -> None:
    from kernelproof_core.verify import run_verification

    spec = request.spec
    log.info("submission %s attempt %d: verifying", spec.submission_id, spec.attempt_no)
    report = run_verification([spec.job], spec.campaign, executors.get(spec.sandbox), command="service")
    path = Path(request.report_path)
    partial = path.with_suffix(".partial")
    partial.write_text(report.model_dump_json())
    partial.replace(path)  # atomic: the worker never reads half a report
    log.info("submission %s attempt %d: %s", spec.submission_id, spec.attempt_no, report.summary.verdict.value)


def main(argv: list[str]) -> int:
    _die_with_parent(int(os.environ.get("KERNELPROOF_JOB_PARENT_PID", os.getppid())))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kernelproof_core.settings import get_settings

    overlap = get_settings().worker_overlap
    results = os.fdopen(int(argv[0]), "w", buffering=1)
    answer_lock = threading.Lock()
    executors = Executors(overlap)

    def handle(line: str) -> None:
        request_id = None
        try:
            request = JobRequest.model_validate_json(line)
            request_id = request.request_id
            run_request(request, executors)
            answer: dict[str, Any] = {"ok": True}
        except Exception as exc:  # our fault or the executor's: the attempt fails, the process lives on
            log.exception("attempt failed")
            answer = {"ok": False, "error": "".join(traceback.format_exception(exc, limit=-8))[-4000:]}
        answer["id"] = request_id
        with answer_lock:
            results.write(json.dumps(answer) + "\n")

    with ThreadPoolExecutor(max_workers=overlap, thread_name_prefix="kp-job") as pool:
        for line in sys.stdin:
            if overlap > 1:
                pool.submit(handle, line)
            else:
                handle(line)
    executors.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
