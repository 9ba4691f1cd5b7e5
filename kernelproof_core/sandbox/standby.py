"""Standby children: forked ahead of their request, so a candidate does not wait for its process's start-up.

A sandboxed child's trusted start-up (CUDA context, CUPTI's first session: 5.3-5.5 s on the H200 host, the
warm-up kernel) used to sit between "runner asked to verify" and "candidate code starts". Each standby is still a
fresh, single-use child of the clean fork server, forked before the candidate it will serve is known: it does
its start-up, then blocks on its result channel until its job arrives. While one child runs a candidate, the
pool's standbys start up beside it, so a stream of candidates overlaps each one's start-up with the previous
one's run.

Two rules keep this from weakening isolation or measurement:
  * standbys are used only where landlock confines each child's writes to its own scratch directory: otherwise
    a running candidate (same uid) could plant files in a standby's Triton cache or home, which would be a
    channel into the next candidate's process;
  * while the running child is in a timed phase ("measure"), every standby is stopped (SIGSTOP through the fork
    server) and continued after, so their start-up never competes with a measurement.
A standby that died while waiting (killed by a candidate where landlock cannot scope signals, say) is noticed
from the fork server's report and replaced by a fresh fork; the candidate never sees it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid

from kernelproof_core.sandbox.channels import Channels, fork_child
from kernelproof_core.sandbox.protocol import send_ctl
from kernelproof_core.sandbox.server import ServerProcess

log = logging.getLogger(__name__)


class StandbyPool:
    """Up to `size` standby children of one fork server."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ready: list[Channels] = []
        self.paused = False  # a measurement is running: standbys forked now are frozen straight away
        # pause() may come from another executor's thread (sandbox/arbiter.py) while this one takes or fills.
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._ready)

    def take(self, server: ServerProcess) -> Channels | None:
        """The oldest standby that is still alive (it has had the most time to start up), or None."""
        server.poll_exits()
        with self._lock:
            return self._take(server)

    def _take(self, server: ServerProcess) -> Channels | None:
        while self._ready:
            channels = self._ready.pop(0)
            if channels.run_id in server.exits:
                status = server.exits.pop(channels.run_id)
                log.warning("standby child %s ended before its job (wait status %s); replaced", channels.run_id,
                            status)
                channels.close()
                continue
            # Possibly frozen for a measurement: from now on its own run decides (sandbox/arbiter.py freezes it
            # again if a timed phase is still going). SIGCONT to a running child changes nothing.
            with contextlib.suppress(OSError):
                send_ctl(server.ctl, {"type": "thaw", "id": channels.run_id})
            return channels
        return None

    def fill(self, server: ServerProcess) -> None:
        """Fork standbys until the pool is full. A server that cannot fork is left to the run to report."""
        while len(self._ready) < self.size:
            try:
                channels = fork_child(server, uuid.uuid4().hex)
            except Exception as exc:  # the run that follows reports the broken server as infra_error
                log.warning("could not fork a standby child: %s", exc)
                return
            with self._lock:
                self._ready.append(channels)
                if self.paused:
                    with contextlib.suppress(OSError):
                        send_ctl(server.ctl, {"type": "freeze", "id": channels.run_id})

    def pause(self, server: ServerProcess, paused: bool) -> None:
        """Stop (or continue) every standby, so none competes with a measurement."""
        with self._lock:
            self.paused = paused
            for channels in self._ready:
                with contextlib.suppress(OSError):
                    send_ctl(server.ctl, {"type": "freeze" if paused else "thaw", "id": channels.run_id})

    def clear(self, server: ServerProcess | None) -> None:
        """End every standby (the server kills them; closing our channel ends one still waiting anyway)."""
        with self._lock:
            for channels in self._ready:
                if server is not None:
                    with contextlib.suppress(OSError):
                        send_ctl(server.ctl, {"type": "kill", "id": channels.run_id})
                channels.close()
            self._ready.clear()
