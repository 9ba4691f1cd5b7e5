"""One candidate child's channels to the trusted parent, and asking a fork server for a child on fresh ones.

Each child gets a private result socket (JSON lines, with SCM_CREDENTIALS so the parent learns its host pid) and two
capped output pipes; the parent keeps the other ends (`Channels`). The fork server forks the child with them
(forkserver.py); a standby child (standby.py) starts up on its own and waits on `res` for its request.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass

from kernelproof_core.sandbox.protocol import send_ctl
from kernelproof_core.sandbox.server import SandboxStartError, ServerProcess


@dataclass
class Channels:
    """Our ends of one child's result channel and output pipes. A child is forked with them; a standby child
    starts up on its own and waits on `res` for its request."""

    run_id: str
    res: socket.socket
    out_r: int
    err_r: int

    def close(self) -> None:
        for fd in (self.out_r, self.err_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.res.close()


def fork_child(server: ServerProcess, run_id: str, gpu: bool = True) -> Channels:
    """Ask `server` to fork a child on fresh channels (`gpu=False`: a precompile child, no GPU start-up).
    SandboxStartError if the server is unreachable."""
    res, res_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    res.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        send_ctl(server.ctl, {"type": "run", "id": run_id, "gpu": gpu}, [res_child.fileno(), out_w, err_w])
    except OSError as exc:
        for fd in (out_r, err_r):
            os.close(fd)
        res.close()
        raise SandboxStartError(f"fork server unreachable: {exc}") from None
    finally:
        res_child.close()
        os.close(out_w)
        os.close(err_w)
    return Channels(run_id, res, out_r, err_r)
