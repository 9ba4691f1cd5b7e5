"""The trusted parent's watchdog: hands each candidate its channels, owns every deadline, kills.

`supervise()` runs one request through a fork server (server.py): it reads the child's result channel and its
capped stdout/stderr, moves the child into its cgroup as soon as the kernel has told us its host pid, enforces
the start, compile and execution deadlines, and kills the whole tree (pidfd, cgroup, the server's pid-namespace
sweep, and as a last resort the whole sandbox) on expiry, oversized output or protocol abuse. It never parses
stdout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelproof_core.pipeline import PipelineEvents
from kernelproof_core.report.models import CaseResult, Environment
from kernelproof_core.sandbox.arbiter import GpuArbiter
from kernelproof_core.sandbox.cgroups import CandidateCgroup
from kernelproof_core.sandbox.channels import Channels, fork_child
from kernelproof_core.sandbox.deaths import Death, KillReason
from kernelproof_core.sandbox.protocol import (
    CONTINUE,
    AbortMsg,
    Armed,
    CaseDoneMsg,
    ChildRequest,
    DoneMsg,
    EnvironmentMsg,
    HarnessErrorMsg,
    Hello,
    LineReader,
    PhaseMsg,
    PrecompiledMsg,
    ProtocolError,
    encode_line,
    parse_child_message,
    recv_ctl,
    recv_with_credentials,
    send_ctl,
)
from kernelproof_core.sandbox.results import relabel_fork_failure
from kernelproof_core.sandbox.server import ServerProcess

log = logging.getLogger(__name__)
HELD_POLL_S = 0.5  # while the arbiter holds the child, the watch loop looks at its deadlines this often
SETUP_PHASES = ("prepare", "arm")  # sent by the harness before the candidate loads; no deadline change


@dataclass
class RunOutcome:
    """What one supervised request produced."""

    cases: list[CaseResult] = field(default_factory=list)
    environment: Environment | None = None
    precompiled: PrecompiledMsg | None = None
    armed: Armed | None = None
    death: Death | None = None
    cgroup_layers: list[str] = field(default_factory=list)
    stdout_tail: bytes = b""
    stderr_tail: bytes = b""
    output_bytes: int = 0
    server_lost: bool = False
    last_phase: str = "starting"  # the phase the child was in when it died or was killed
    last_case: str | None = None  # the case of the child's last phase (with deferred measurement it may be ahead
    # of the first unreported case: results.complete attributes a death to it)
    timestamps: dict[str, float] = field(default_factory=dict)  # monotonic times of milestones


@dataclass
class Budget:
    compile_s: float
    execution_s: float
    start_s: float
    kill_grace_s: float
    output_cap_bytes: int
    max_message_bytes: int
    memory_bytes: int | None  # cgroup limits (None: no cgroup)
    max_processes: int | None
    cgroup_version: int | None


def supervise(server: ServerProcess, request: ChildRequest, budget: Budget, planned_ids: list[str],
              run_id: str, events: PipelineEvents | None = None, *, channels: Channels | None = None,
              measuring: Callable[[bool], None] | None = None, arbiter: GpuArbiter | None = None) -> RunOutcome:
    """Run one request under the watchdog, in a standby child (`channels`) or a freshly forked one.
    `measuring(True/False)` is called as the child enters and leaves its exclusive timing phases. With an `arbiter`
    (runs sharing a GPU; the request must ask for rendezvous) the child stops at every phase boundary until the
    arbiter releases it, and time spent stopped does not count against its deadlines.
    SandboxStartError if it cannot even hand over."""
    if (arbiter is not None) != request.rendezvous:
        raise ValueError("a request asks for rendezvous exactly when an arbiter supervises it")
    channels = channels or fork_child(server, run_id)
    watch = _Watch(server, request, budget, planned_ids, channels, events, measuring, arbiter)
    try:
        return watch.run()
    finally:
        watch.close()


class _Watch:
    """One run's state machine: starting -> load -> (compile <-> execute)* -> finishing (or killing)."""

    def __init__(self, server: ServerProcess, request: ChildRequest, budget: Budget, planned_ids: list[str],
                 channels: Channels, events: PipelineEvents | None,
                 measuring: Callable[[bool], None] | None, arbiter: GpuArbiter | None = None) -> None:
        self.server, self.request, self.budget, self.planned_ids, self.run_id = (
            server, request, budget, planned_ids, channels.run_id)
        self.channels = channels
        self.res, self.out_r, self.err_r = channels.res, channels.out_r, channels.err_r
        self.events = events
        self.measuring_cb = measuring
        self.measuring = False
        self.outcome = RunOutcome()
        self.reader = LineReader(budget.max_message_bytes)
        self.captured = {self.out_r: bytearray(), self.err_r: bytearray()}
        self.open_fds: set[int] = {self.res.fileno(), self.out_r, self.err_r}
        now = time.monotonic()
        self.outcome.timestamps["asked"] = now
        self.phase = "starting"
        self.deadline: float | None = now + budget.start_s
        self.exec_used = 0.0
        self.exec_started = 0.0
        self.host_pid: int | None = None
        self.pidfd: int | None = None
        self.cgroup: CandidateCgroup | None = None
        self.started = self.done = self.exited = False
        self.status: int | None = None
        self.kill_reason: KillReason | None = None
        self.kill_detail = ""
        self.harness_error: str | None = None
        self.abort: str | None = None
        self.pids_hits = 0
        self.next_gate = 0  # index of the next planned case whose gates may start (its compile phase)
        # Rendezvous (arbiter): since when the child has been held (at a boundary, or frozen while starting up).
        self.arbiter = arbiter
        self.held_since: float | None = None
        self._holds: set[str] = set()  # "waiting" (at a boundary), "frozen" (SIGSTOP for another run's phase)
        self._hold_lock = threading.Lock()
        if self.run_id in server.exits:  # a standby that ended while waiting for its request
            self._exited(server.exits.pop(self.run_id))
        if arbiter is not None and not self.exited:
            arbiter.join(self.run_id, self._release, self._freeze)

    # --- main loop -----------------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        self.res.setblocking(False)
        ctl_fd = self.server.ctl.fileno()
        while not self.outcome.server_lost and not (self.exited and not self.open_fds):
            timeout = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
            if self.held_since is not None:  # deadlines wait while the arbiter holds the child; look again soon
                timeout = HELD_POLL_S
            ready, _, _ = select.select([*self.open_fds, ctl_fd], [], [], timeout)
            for fd in ready:
                if self.outcome.server_lost:
                    break
                if fd == ctl_fd:
                    self._on_ctl()
                elif fd == self.res.fileno():
                    self._on_result()
                else:
                    self._on_output(fd)
            if (not self.outcome.server_lost and self.deadline is not None and self.held_since is None
                    and time.monotonic() >= self.deadline):
                self._on_deadline()
        return self._finish()

    def _on_deadline(self) -> None:
        reasons = {"starting": KillReason.START_DEADLINE, "load": KillReason.COMPILE_DEADLINE,
                   "compile": KillReason.COMPILE_DEADLINE, "execute": KillReason.EXECUTION_DEADLINE}
        if self.phase in reasons:
            self._kill(reasons[self.phase], self._where())
        elif self.phase == "finishing":  # results are in but the process lingers: end it, no verdict change
            self._kill(None)
        elif self.phase == "killing":  # the server did not confirm the kill: tear the whole sandbox down
            log.warning("fork server unresponsive after kill; destroying the sandbox")
            self.server.kill()
            self.outcome.server_lost = True
        elif self.phase == "exited":  # a leftover still holds a pipe open after the sweep: stop waiting
            self.open_fds.clear()

    # --- channels ------------------------------------------------------------------------------------------
    def _on_ctl(self) -> None:
        try:
            got = recv_ctl(self.server.ctl)
        except (OSError, ProtocolError):
            got = None
        if got is None:
            self.outcome.server_lost = True
            if not self.exited and self.kill_reason is None and not self.done:
                self.kill_reason = KillReason.SERVER_LOST
            self._kill_host_side()
            return
        msg, fds = got
        for fd in fds:
            os.close(fd)
        if msg.get("type") != "exited":
            return
        status = msg.get("status") if isinstance(msg.get("status"), int) else None
        if msg.get("id") == self.run_id:
            self._exited(status)
        else:  # another child's (a standby): its own watch will read it from here
            self.server.exits[str(msg.get("id"))] = status

    def _exited(self, status: object) -> None:
        self._leave_arbiter()
        self.exited = True
        self.status = status if isinstance(status, int) else None
        self.outcome.timestamps["exited"] = time.monotonic()
        if self.phase != "killing":
            self.outcome.last_phase = self.phase
        self.phase = "exited"
        self.deadline = time.monotonic() + self.budget.kill_grace_s
        self._set_measuring(False)

    def _on_output(self, fd: int) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            self.open_fds.discard(fd)
            return
        self.outcome.output_bytes += len(data)
        buf = self.captured[fd]
        buf += data
        if len(buf) > 64 * 1024:
            del buf[: len(buf) - 64 * 1024]  # keep the tail for diagnostics only
        if (self.outcome.output_bytes > self.budget.output_cap_bytes and not self.done
                and self.kill_reason is None):
            self._kill(KillReason.OUTPUT_CAP)

    def _on_result(self) -> None:
        try:
            if self.host_pid is None:
                data, pid = recv_with_credentials(self.res, 1 << 16)
                if pid is not None and pid > 0:
                    self._adopt(pid)
            else:
                data = self.res.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.open_fds.discard(self.res.fileno())
            return
        try:
            for line in self.reader.feed(data):
                self._on_message(parse_child_message(line))
        except ProtocolError as exc:
            self._protocol_violation(str(exc))

    def _protocol_violation(self, detail: str) -> None:
        self.open_fds.discard(self.res.fileno())
        if self.kill_reason is None and not self.done:
            self._kill(KillReason.PROTOCOL, detail)

    def _adopt(self, pid: int) -> None:
        """The kernel told us the child's host pid: take hold of it before it may run anything untrusted."""
        self.host_pid = pid
        with contextlib.suppress(OSError):
            self.pidfd = os.pidfd_open(pid)
        if self.budget.cgroup_version is not None:
            cg = CandidateCgroup(f"c-{self.run_id}", self.budget.cgroup_version, self.budget.memory_bytes,
                                 self.budget.max_processes)
            try:
                cg.create()
                cg.add(pid)
                self.cgroup = cg
                self.outcome.cgroup_layers = list(cg.layers)
            except OSError as exc:
                log.warning("candidate cgroup unavailable: %s", exc)
                cg.remove()

    def _on_message(self, msg: object) -> None:
        now = time.monotonic()
        self.outcome.timestamps.setdefault("hello", now)
        if self.phase == "starting" and not isinstance(msg, (Hello, Armed, PhaseMsg, EnvironmentMsg, DoneMsg,
                                                            HarnessErrorMsg)):
            raise ProtocolError(f"unexpected {type(msg).__name__} before the candidate started")
        if isinstance(msg, Hello):
            if self.host_pid is None:
                raise ProtocolError("hello without credentials")
            self.res.setblocking(True)
            self.res.settimeout(10.0)
            try:
                self.res.sendall(encode_line(self.request))
            finally:
                self.res.setblocking(False)
        elif isinstance(msg, Armed):
            self.outcome.armed = msg
            self.outcome.timestamps["armed"] = now
        elif isinstance(msg, PhaseMsg):
            self._on_phase(msg, now)
            if self.arbiter is not None:  # the child waits at this boundary for the arbiter's release
                self._hold("waiting", True)
                self.arbiter.reached(self.run_id, msg.name)
            if self.events is not None and msg.name not in SETUP_PHASES:
                try:
                    self.events.phase(msg.name, msg.case_id)
                except Exception:  # a caller's progress display must not break the watchdog
                    log.exception("events.phase callback failed")
        elif isinstance(msg, CaseDoneMsg):
            self._set_measuring(False)
            index = len(self.outcome.cases)
            if index >= len(self.planned_ids) or msg.result.case_id != self.planned_ids[index]:
                raise ProtocolError(f"unexpected result for case {msg.result.case_id!r}")
            hits = self.cgroup.pids_limit_hits() if self.cgroup else 0
            # The pids cgroup refused a fork during this case (or while loading: then every case failed by it).
            if hits > self.pids_hits or (self.phase == "load" and hits > 0):
                relabel_fork_failure(msg.result, self.budget.max_processes or 0)
            self.pids_hits = hits
            self.outcome.cases.append(msg.result)
            if self.events is not None:
                try:
                    self.events.case_done(msg.result)
                except Exception:  # a caller's progress display must not break the watchdog
                    log.exception("events.case_done callback failed")
        elif isinstance(msg, EnvironmentMsg):
            self.outcome.environment = msg.environment
        elif isinstance(msg, PrecompiledMsg):
            if self.request.kind != "precompile" or self.outcome.precompiled is not None:
                raise ProtocolError("precompiled entries outside a precompile request")
            self.outcome.precompiled = msg
        elif isinstance(msg, DoneMsg):
            self.done = True
            self.outcome.timestamps["done"] = now
            self._finishing(now)
        elif isinstance(msg, HarnessErrorMsg):
            self.harness_error = msg.message
            log.error("harness error in sandbox child: %s\n%s", msg.message, msg.traceback)
            self._finishing(now)
        elif isinstance(msg, AbortMsg):
            self.abort = msg.exception

    def _on_phase(self, msg: PhaseMsg, now: float) -> None:
        if msg.name in SETUP_PHASES:  # the trusted harness setting up: timestamps for the start-up breakdown
            if self.started:
                raise ProtocolError(f"setup phase {msg.name} after load")
            self.outcome.timestamps.setdefault(msg.name, now)
            return
        if msg.name == "load":
            if self.started:
                raise ProtocolError("second load phase")
            self.started = True
            self.outcome.timestamps["load"] = now
            self.phase, self.deadline = "load", now + self.budget.compile_s
            return
        if not self.started:
            raise ProtocolError(f"phase {msg.name} before load")
        self._check_case_order(msg)
        self.outcome.last_case = msg.case_id
        if self.phase == "execute":
            self.exec_used += now - self.exec_started
        self._set_measuring(msg.name == "measure")
        if msg.name == "compile":
            self.phase, self.deadline = "compile", now + self.budget.compile_s
        else:  # execute or measure: both spend the execution budget
            self.phase, self.exec_started = "execute", now
            self.deadline = now + max(0.0, self.budget.execution_s - self.exec_used)

    def _check_case_order(self, msg: PhaseMsg) -> None:
        """Cases start their gates (compile) in plan order; execute follows its compile; measure is for the first
        case without a result, whose gates ran. With deferred measurement (pipeline._run_plan) later cases' gates
        run before earlier cases' measurements, so those three rules are what is checked, not one position."""
        reported = len(self.outcome.cases)
        if msg.name == "compile":
            index = max(self.next_gate, reported)
            ok = index < len(self.planned_ids) and msg.case_id == self.planned_ids[index]
            self.next_gate = index + 1
        elif msg.name == "execute":
            ok = 0 < self.next_gate <= len(self.planned_ids) and msg.case_id == self.planned_ids[self.next_gate - 1]
        else:
            ok = reported < min(self.next_gate, len(self.planned_ids)) and msg.case_id == self.planned_ids[reported]
        if not ok:
            raise ProtocolError(f"phase {msg.name} for unexpected case {msg.case_id!r}")

    def _set_measuring(self, on: bool) -> None:
        if on != self.measuring:
            self.measuring = on
            if self.measuring_cb is not None:
                try:
                    self.measuring_cb(on)
                except Exception:  # freezing standbys is an optimisation; it must not break the watchdog
                    log.exception("measuring callback failed")

    def _finishing(self, now: float) -> None:
        self._leave_arbiter()  # results are in: nothing more of this child touches the GPU
        self._set_measuring(False)
        if self.phase not in ("killing", "exited"):
            self.phase, self.deadline = "finishing", now + self.budget.kill_grace_s

    # --- killing -------------------------------------------------------------------------------------------
    def _where(self) -> str:
        """Where a deadline ran out, for the verdict's message: a hang in a case's first call is not Triton's
        compiler however the deadline is named, and the user needs to know which call it was."""
        case = self.outcome.last_case
        return {"starting": "the harness was starting",
                "load": "while importing the candidate module",
                "compile": f"in the first call of case {case} (Triton's JIT compile and the first run)",
                "execute": f"in case {case}'s later calls"}.get(self.phase, self.phase)

    def _kill(self, reason: KillReason | None, detail: str = "") -> None:
        self._leave_arbiter()
        if reason is not None and self.kill_reason is None:
            self.kill_reason, self.kill_detail = reason, detail
            self.outcome.timestamps["kill"] = time.monotonic()
        if self.phase not in ("killing", "exited"):
            self.outcome.last_phase = self.phase
        self._kill_host_side()
        with contextlib.suppress(OSError):
            send_ctl(self.server.ctl, {"type": "kill", "id": self.run_id})
        if self.phase != "exited":
            self.phase, self.deadline = "killing", time.monotonic() + self.budget.kill_grace_s

    def _kill_host_side(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill(timeout_s=self.budget.kill_grace_s)

    def _finish(self) -> RunOutcome:
        out = self.outcome
        oom = False
        if self.cgroup is not None:
            oom = self.cgroup.oom_kills() > 0
            self.cgroup.remove()
        out.death = Death(wait_status=self.status, started=self.started, done=self.done,
                          kill_reason=self.kill_reason, kill_detail=self.kill_detail, oom_killed=oom,
                          harness_error=self.harness_error, abort=self.abort)
        out.stdout_tail = bytes(self.captured[self.out_r][-4096:])
        out.stderr_tail = bytes(self.captured[self.err_r][-4096:])
        return out

    # --- rendezvous (called from whichever supervisor thread the arbiter decides in) ----------------------
    def _hold(self, reason: str, on: bool) -> None:
        """The child is held while it waits at a boundary and while it is frozen (either or both); while held, its
        deadlines and execution budget do not run."""
        with self._hold_lock:
            now = time.monotonic()
            was_held = bool(self._holds)
            if on:
                self._holds.add(reason)
            else:
                self._holds.discard(reason)
            if self._holds and not was_held:
                self.held_since = now
            elif was_held and not self._holds and self.held_since is not None:
                held = now - self.held_since
                if self.deadline is not None and self.phase not in ("finishing", "killing", "exited"):
                    self.deadline += held
                if self.phase == "execute":  # held time is not execution time either
                    self.exec_started += held
                self.held_since = None

    def _release(self) -> None:
        self._hold("waiting", False)
        if self.phase not in ("killing", "exited"):
            with contextlib.suppress(OSError):  # a child that died meanwhile shows up through the server
                self.res.send(CONTINUE)

    def _freeze(self, frozen: bool) -> None:
        self._hold("frozen", frozen)
        with contextlib.suppress(OSError):
            send_ctl(self.server.ctl, {"type": "freeze" if frozen else "thaw", "id": self.run_id})

    def _leave_arbiter(self) -> None:
        """Out of the arbiter's seats (idempotent); held no more, so its deadlines run again."""
        if self.arbiter is not None:
            self.arbiter.leave(self.run_id)
        with self._hold_lock:
            self._holds.clear()
            self.held_since = None

    def close(self) -> None:
        self._leave_arbiter()
        self._set_measuring(False)
        if self.pidfd is not None:
            os.close(self.pidfd)
        self.channels.close()
