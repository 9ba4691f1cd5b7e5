"""One warm fork server as seen from the supervisor: its process (bwrap, or a plain subprocess in degraded mode),
its control socket, and its own log output (drained into our logging, never parsed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
from collections import deque

from kernelproof_core.errors import InfraError
from kernelproof_core.sandbox.protocol import ProtocolError, recv_ctl, send_ctl

log = logging.getLogger(__name__)
STDERR_TAIL_LINES = 200


class SandboxStartError(InfraError):
    """The sandbox itself could not be started (never the candidate's fault)."""


class ServerProcess:
    """One fork server and its control socket."""

    def __init__(self, argv: list[str], env: dict[str, str], ctl: socket.socket,
                 ctl_child: socket.socket) -> None:
        self.ctl = ctl
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, pass_fds=[ctl_child.fileno()],
                                     start_new_session=True, cwd="/")
        ctl_child.close()
        self.ready: dict[str, object] = {}
        # "exited" reports read by one run's watch that belong to another child (a standby that died waiting)
        self.exits: dict[str, int | None] = {}
        self._drain = threading.Thread(target=self._drain_stderr, name="forkserver-stderr", daemon=True)
        self._drain.start()

    @classmethod
    def spawn(cls, prefix: list[str], server_cmd: list[str], env: dict[str, str]) -> ServerProcess:
        ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctl_child.set_inheritable(True)
        cmd = [*prefix, *server_cmd, "--ctl-fd", str(ctl_child.fileno())]
        return cls(cmd, env, ctl, ctl_child)

    def _drain_stderr(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw[:2000].decode(errors="replace").rstrip()
            self.stderr_tail.append(line)
            log.debug("forkserver: %s", line)

    def wait_ready(self, timeout_s: float) -> dict[str, object]:
        self.ctl.settimeout(timeout_s)
        try:
            got = recv_ctl(self.ctl)
        except (TimeoutError, OSError, ProtocolError) as exc:
            self.kill()
            raise SandboxStartError(f"fork server did not start: {exc}; stderr: {self.tail()}") from None
        finally:
            self.ctl.settimeout(None)
        if got is None or got[0].get("type") != "ready":
            self.kill()
            raise SandboxStartError(f"fork server exited during start-up; stderr: {self.tail()}")
        self.ready = got[0]
        return self.ready

    def poll_exits(self) -> None:
        """Read, without waiting, control messages that arrived while no run was being watched: "exited" reports
        of standby children go to `exits`."""
        self.ctl.setblocking(False)
        try:
            while True:
                try:
                    got = recv_ctl(self.ctl)
                except (BlockingIOError, InterruptedError):
                    return
                except (OSError, ProtocolError):
                    return  # a broken channel shows up as a dead server or a failed run
                if got is None:
                    return
                msg, fds = got
                for fd in fds:
                    os.close(fd)
                if msg.get("type") == "exited":
                    status = msg.get("status")
                    self.exits[str(msg.get("id"))] = status if isinstance(status, int) else None
        finally:
            self.ctl.setblocking(True)

    def tail(self, n: int = 20) -> str:
        if self.proc.poll() is not None:  # let the drain thread catch the last lines
            self._drain.join(timeout=0.2)
        return " | ".join(list(self.stderr_tail)[-n:])[-3000:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        with contextlib.suppress(OSError):
            send_ctl(self.ctl, {"type": "exit"})
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self.ctl.close()

    def kill(self) -> None:
        """SIGKILL the sandbox: bwrap's pid-namespace init dies, and the kernel kills everything inside."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
