"""The worker's side of the job process: start it, hand it attempts, enforce each attempt's deadline by killing
its process group, and read back the reports. With `KERNELPROOF_WORKER_OVERLAP` = N > 1 the job process verifies up
to N sandboxed attempts at once (worker.job_process); this side then serves N worker threads at once, matching
answers to attempts by request id."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kernelproof_core.report.models import Report
from kernelproof_core.store.transitions import Claim
from kernelproof_core.store.types import utcnow
from worker.job_process import JobRequest, JobSpec

log = logging.getLogger(__name__)
LOG_TAIL_BYTES = 4000
LOG_ROTATE_BYTES = 8 * 1024 * 1024
POLL_S = 0.2  # how often a waiting attempt checks its own deadline while another thread reads


@dataclass(frozen=True, slots=True)
class AttemptResult:
    report: Report | None
    error: str | None = None


@dataclass
class _Process:
    """One job process and the answers read from it so far (by request id)."""

    proc: subprocess.Popen[str]
    results: int
    answers: dict[str, dict[str, object]] = field(default_factory=dict)
    buffer: bytes = b""
    reading: bool = False  # a thread is reading the result pipe for everyone (with the host's lock released)
    dead: bool = False  # the pipe reached end of file, or the process was ended or killed
    fd_closed: bool = False
    killed_for: str | None = None  # the attempt whose deadline killed it


class JobHost:
    """Owns the job process. persistent=True keeps it alive between attempts (with the sandbox: every candidate
    still gets a fresh sandboxed child, and the fork server stays warm); otherwise each attempt gets a new one.
    A dead or timed-out process is replaced on the next attempt. Thread-safe: with a persistent host, several worker
    threads may run attempts at once (the job process overlaps them when KERNELPROOF_WORKER_OVERLAP > 1, and runs
    them one after another otherwise). An attempt past its deadline kills the process, and with it the attempts
    sharing it, which fail as infrastructure errors and are retried."""

    def __init__(self, persistent: bool) -> None:
        self.persistent = persistent
        self._dir = Path(tempfile.mkdtemp(prefix="kernelproof-jobs-"))
        self._log_path = self._dir / "job.log"
        self._lock = threading.Condition()
        self._current: _Process | None = None

    @property
    def _proc(self) -> subprocess.Popen[str] | None:
        """The live job process, if any (tests pin down that it is reused)."""
        current = self._current
        return current.proc if current is not None else None

    def _start(self) -> _Process:
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
        self._current = _Process(proc, read_fd)
        return self._current

    def close(self) -> None:
        """End the job process (politely if idle, by SIGKILL to its group otherwise)."""
        with self._lock:
            current, self._current = self._current, None
            if current is not None:
                _end(current)
                self._lock.notify_all()

    def _log_tail(self, offset: int) -> str:
        try:
            with self._log_path.open("rb") as f:
                f.seek(max(offset, self._log_path.stat().st_size - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def run(self, claim: Claim, sandbox: bool) -> AttemptResult:
        """Run one attempt within the time left before the claim's deadline."""
        request_id = uuid.uuid4().hex
        report_path = self._dir / f"{claim.submission_id}-{claim.attempt_no}-{request_id[:8]}.json"
        spec = JobSpec(
            submission_id=claim.submission_id,
            attempt_no=claim.attempt_no,
            job=claim.job,
            campaign=claim.campaign,
            sandbox=sandbox,
        )
        timeout = max(1.0, (claim.deadline_at - utcnow()).total_seconds())
        request = JobRequest(spec=spec, report_path=str(report_path), request_id=request_id)
        with self._lock:
            if self._current is None and self._log_path.exists() \
                    and self._log_path.stat().st_size > LOG_ROTATE_BYTES:
                os.truncate(self._log_path, 0)
            offset = self._log_path.stat().st_size if self._log_path.exists() else 0
            current = self._current
            if current is None or current.dead or current.proc.poll() is not None:
                if current is not None:
                    self._current = None
                    _end(current)
                current = self._start()
            try:
                assert current.proc.stdin is not None
                current.proc.stdin.write(request.model_dump_json() + "\n")
                current.proc.stdin.flush()
            except OSError as exc:
                self._current = None
                _end(current)
                return AttemptResult(None, f"job process unavailable: {exc}")
        try:
            return self._wait(current, request_id, report_path, time.monotonic() + timeout, timeout, offset)
        finally:
            report_path.unlink(missing_ok=True)
            if not self.persistent:
                self.close()

    def _wait(self, current: _Process, request_id: str, report_path: Path, deadline: float, timeout: float,
              offset: int) -> AttemptResult:
        """Until this attempt's answer arrives, the process dies, or the deadline passes. One waiting thread at a
        time reads the pipe for everyone; the others wake when it delivers."""
        with self._lock:
            while True:
                if request_id in current.answers:
                    reply = current.answers.pop(request_id)
                    break
                if current.dead:
                    if current.killed_for not in (None, request_id):
                        return AttemptResult(None, "job process killed at another attempt's deadline; retried")
                    rc = current.proc.wait()
                    if not current.reading:
                        _close_fd(current)
                    if self._current is current:
                        self._current = None
                    return AttemptResult(None, f"job process exited with status {rc}: {self._log_tail(offset)}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    current.killed_for = request_id
                    _kill_group(current.proc)
                    current.dead = True
                    if not current.reading:
                        _close_fd(current)
                    if self._current is current:
                        self._current = None
                    self._lock.notify_all()
                    return AttemptResult(None, f"job process exceeded the attempt deadline ({timeout:.0f} s)")
                if current.reading:
                    self._lock.wait(min(remaining, POLL_S))
                    continue
                current.reading = True
                self._lock.release()
                try:
                    lines, eof = _read_lines(current, min(remaining, POLL_S))
                finally:
                    self._lock.acquire()
                    current.reading = False
                    if current.dead:
                        _close_fd(current)  # ended while this thread read: the fd was left to it
                for line in lines:
                    _deliver(current, line)
                if eof:
                    current.dead = True
                self._lock.notify_all()
        try:
            if not reply.get("ok"):
                return AttemptResult(None, f"job process failed: {reply.get('error', '')}"[:LOG_TAIL_BYTES])
            return AttemptResult(Report.model_validate_json(report_path.read_text()))
        except (ValueError, ValidationError, OSError) as exc:
            return AttemptResult(None, f"unreadable result: {exc}"[:LOG_TAIL_BYTES])


def _read_lines(current: _Process, wait_s: float) -> tuple[list[bytes], bool]:
    """Complete lines available on the result pipe within `wait_s`; and whether it reached end of file."""
    if not select.select([current.results], [], [], wait_s)[0]:
        return [], False
    chunk = os.read(current.results, 65536)
    if not chunk:
        return [], True
    current.buffer += chunk
    *lines, current.buffer = current.buffer.split(b"\n")
    return lines, False


def _deliver(current: _Process, line: bytes) -> None:
    try:
        reply = json.loads(line)
    except ValueError:
        log.error("unreadable answer from the job process: %r", line[:200])
        return
    if isinstance(reply, dict):
        current.answers[str(reply.get("id"))] = reply


def _end(current: _Process) -> None:
    """(Under the host's lock) end the process: politely if idle, by SIGKILL to its group otherwise."""
    proc = current.proc
    try:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        _kill_group(proc)
    current.dead = True
    if not current.reading:  # else the reading thread closes it when it comes back
        _close_fd(current)


def _close_fd(current: _Process) -> None:
    if not current.fd_closed:
        current.fd_closed = True
        try:
            os.close(current.results)
        except OSError:
            pass


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
