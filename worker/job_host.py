"""The worker's side of the job process: start it, hand it one attempt at a time, enforce the attempt's
deadline by killing its process group, and read back the report."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from kernelproof_core.report.models import Report
from kernelproof_core.store.transitions import Claim
from kernelproof_core.store.types import utcnow
from worker.job_process import JobRequest, JobSpec

log = logging.getLogger(__name__)
LOG_TAIL_BYTES = 4000
LOG_ROTATE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AttemptResult:
    report: Report | None
    error: str | None = None


class JobHost:
    """Owns the job process. persistent=True keeps it alive between attempts (with the sandbox: every candidate
    still gets a fresh sandboxed child, and the fork server stays warm); otherwise each attempt gets a new one.
    A dead or timed-out process is replaced on the next attempt. Not thread-safe: one per worker thread."""

    def __init__(self, persistent: bool) -> None:
        self.persistent = persistent
        self._dir = Path(tempfile.mkdtemp(prefix="kernelproof-jobs-"))
        self._log_path = self._dir / "job.log"
        self._proc: subprocess.Popen[str] | None = None
        self._results: int | None = None
        self._buffer = b""

    def _start(self) -> subprocess.Popen[str]:
        read_fd, write_fd = os.pipe()
        env = dict(os.environ, KERNELPROOF_JOB_PARENT_PID=str(os.getpid()))
        with self._log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "worker.job_process", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                text=True,
                pass_fds=(write_fd,),
                start_new_session=True,  # its own process group: a deadline kills every descendant
            )
        os.close(write_fd)
        self._proc, self._results, self._buffer = proc, read_fd, b""
        return proc

    def close(self) -> None:
        """End the job process (politely if idle, by SIGKILL to its group otherwise)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                _kill_group(proc)
        if self._results is not None:
            os.close(self._results)
            self._results = None

    def _log_tail(self, offset: int) -> str:
        try:
            with self._log_path.open("rb") as f:
                f.seek(max(offset, self._log_path.stat().st_size - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _read_answer(self, deadline: float) -> bytes | None:
        """One line from the result pipe; None at the deadline; b"" if the process died first."""
        assert self._results is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._results], [], [], remaining)[0]:
                return None
            chunk = os.read(self._results, 65536)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def run(self, claim: Claim, sandbox: bool) -> AttemptResult:
        """Run one attempt within the time left before the claim's deadline."""
        if self._log_path.exists() and self._log_path.stat().st_size > LOG_ROTATE_BYTES:
            os.truncate(self._log_path, 0)
        offset = self._log_path.stat().st_size if self._log_path.exists() else 0
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        report_path = self._dir / f"{claim.submission_id}-{claim.attempt_no}.json"
        spec = JobSpec(
            submission_id=claim.submission_id,
            attempt_no=claim.attempt_no,
            job=claim.job,
            campaign=claim.campaign,
            sandbox=sandbox,
        )
        timeout = max(1.0, (claim.deadline_at - utcnow()).total_seconds())
        try:
            return self._exchange(
                proc, JobRequest(spec=spec, report_path=str(report_path)), report_path, timeout, offset
            )
        finally:
            report_path.unlink(missing_ok=True)
            if not self.persistent:
                self.close()

    def _exchange(
        self, proc: subprocess.Popen[str], request: JobRequest, report_path: Path, timeout: float, offset: int
    ) -> AttemptResult:
        stdin: IO[str] | None = proc.stdin
        try:
            assert stdin is not None
            stdin.write(request.model_dump_json() + "\n")
            stdin.flush()
        except OSError as exc:
            self.close()
            return AttemptResult(None, f"job process unavailable: {exc}")
        answer = self._read_answer(time.monotonic() + timeout)
        if answer is None:
            _kill_group(proc)
            self.close()
            return AttemptResult(None, f"job process exceeded the attempt deadline ({timeout:.0f} s)")
        if not answer:
            rc = proc.wait()
            self.close()
            return AttemptResult(None, f"job process exited with status {rc}: {self._log_tail(offset)}")
        try:
            reply = json.loads(answer)
            if not reply.get("ok"):
                return AttemptResult(None, f"job process failed: {reply.get('error', '')}"[:LOG_TAIL_BYTES])
            return AttemptResult(Report.model_validate_json(report_path.read_text()))
        except (ValueError, ValidationError, OSError) as exc:
            return AttemptResult(None, f"unreadable result: {exc}"[:LOG_TAIL_BYTES])


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
