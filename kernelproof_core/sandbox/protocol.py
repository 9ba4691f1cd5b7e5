"""Wire formats between the supervisor, the fork server and the candidate child.

Two channels, both set up by the trusted harness (never stdout/stderr):

* control (supervisor <-> fork server): a SOCK_SEQPACKET socket pair; small JSON messages, one per packet,
  with file descriptors attached by SCM_RIGHTS when the supervisor hands the server a new candidate's
  channels.
* result (supervisor <-> one candidate child): a SOCK_STREAM socket pair carrying JSON lines. The child's
  first line carries SCM_CREDENTIALS so the kernel tells the supervisor the child's host pid (translated
  across the pid namespace), which is how the supervisor places the child in its cgroup and signals it without
  trusting anyone.

Everything the child sends after the candidate's code started is untrusted input: it is size-capped, parsed
with strict models, and anything malformed is the candidate's doing (see deaths.py).
"""

from __future__ import annotations

import json
import os
import socket
import struct
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from kernelproof_core.campaign import Campaign, CandidateJob, Device
from kernelproof_core.report.models import CaseResult, Environment

CTL_MAX_BYTES = 64 * 1024
MAX_FDS = 8
_UCRED = struct.Struct("3i")


CONTINUE = b"c"  # supervisor -> child, the only byte it sends after the request: go on past a phase boundary


class ProtocolError(Exception):
    """A peer sent something that is not a valid message (or too much of it)."""


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- Child -> supervisor, on the result channel. ----------------------------------------------------------
class Hello(_Msg):
    type: Literal["hello"] = "hello"


class Armed(_Msg):
    """Sent after the child applied its own layers, before any candidate code runs (so it is trustworthy)."""

    type: Literal["armed"] = "armed"
    layers: list[str]
    missing: list[str]
    notes: list[str] = Field(default_factory=list)


class PhaseMsg(_Msg):
    type: Literal["phase"] = "phase"
    name: Literal["prepare", "arm", "load", "compile", "execute", "measure"]
    case_id: str | None = None


class CaseDoneMsg(_Msg):
    type: Literal["case_done"] = "case_done"
    result: CaseResult


class EnvironmentMsg(_Msg):
    type: Literal["environment"] = "environment"
    environment: Environment


class PrecompiledMsg(_Msg):
    """A precompile child's Triton cache entries (sandbox/triton_cache.py) and what it made of the candidate's calls.
    Sent after candidate code ran: untrusted bytes for the same candidate's verification child, nothing more."""

    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")
    type: Literal["precompiled"] = "precompiled"
    files: dict[str, bytes] = Field(default_factory=dict)
    calls: int = 0
    failed: list[str] = Field(default_factory=list)
    launcher_errors: list[str] = Field(default_factory=list)
    dropped_entries: int = Field(0, description="entries left out by the size cap")


class DoneMsg(_Msg):
    type: Literal["done"] = "done"


class HarnessErrorMsg(_Msg):
    """Our own code raised in the child: an infrastructure fault."""

    type: Literal["error"] = "error"
    message: str
    traceback: str = ""


class AbortMsg(_Msg):
    """A BaseException (SystemExit, KeyboardInterrupt...) escaped the pipeline: raised by candidate code."""

    type: Literal["abort"] = "abort"
    exception: str


ChildMessage = Annotated[
    Hello | Armed | PhaseMsg | CaseDoneMsg | EnvironmentMsg | PrecompiledMsg | DoneMsg | HarnessErrorMsg | AbortMsg,
    Field(discriminator="type"),
]
_CHILD_ADAPTER: TypeAdapter[Any] = TypeAdapter(ChildMessage)


# --- Supervisor -> child, on the result channel, once (answer to Hello). ----------------------------------
class ChildLimits(_Msg):
    cpu_time_s: int
    max_file_bytes: int
    max_open_files: int
    max_processes: int
    memory_bytes: int
    nproc_rlimit: bool = Field(description="apply RLIMIT_NPROC (only when no pids cgroup holds the child)")
    address_space_rlimit: bool = Field(description="apply RLIMIT_AS (no memory cgroup; never on CUDA)")


class GpuTarget(_Msg):
    """What Triton compiles for (its GPUTarget), from the probed GPU: a precompile child has no GPU to ask."""

    backend: Literal["cuda"] = "cuda"
    arch: int = Field(description="compute capability as major * 10 + minor (90 on the H200)")
    warp_size: int = 32


class ChildRequest(_Msg):
    """One child's job. `precompile` runs only in a child forked without GPU start-up (and only there), `verify` and
    `environment` only in one with it."""

    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")
    kind: Literal["verify", "environment", "precompile"]
    device: Device
    job: CandidateJob | None = None
    campaign: Campaign | None = None
    limits: ChildLimits
    measure_bandwidth: bool = False
    settings_env: dict[str, str] = Field(default_factory=dict, description="allow-listed KERNELPROOF_* vars")
    required_layers: list[str] = Field(default_factory=list, description="refuse to run unless these applied")
    rendezvous: bool = Field(False, description="stop at every phase boundary until the supervisor's CONTINUE")
    target: GpuTarget | None = Field(None, description="precompile: the GPU to compile for")
    precompile_max_bytes: int = Field(0, description="precompile: cap on the cache entries sent back")
    precompiled: dict[str, bytes] = Field(
        default_factory=dict, description="verify: this candidate's precompiled cache entries, installed before load")


# --- Control channel (supervisor <-> fork server). --------------------------------------------------------
# Environment variables a child does not inherit: our settings (its job brings them) and any Triton cache location.
CHILD_DROPPED_ENV = ("KERNELPROOF_", "TRITON_CACHE", "TRITON_HOME")


class ServerConfig(_Msg):
    """Passed to the fork server on its command line (JSON); nothing in it is secret."""

    device: Device
    scratch_root: str
    drop_to_uid: int | None = Field(None, description="setuid to this uid first (server started as root)")
    drop_to_gid: int | None = None
    sweep_pid_namespace: bool = Field(False, description="own pid namespace: kill every leftover in it")
    read_paths: list[str] = Field(default_factory=list, description="read-only paths candidates may read")
    device_files: list[str] = Field(default_factory=list, description="device nodes candidates may open rw")
    prewarm_triton: bool = True
    landlock: bool = True
    seccomp: bool = True
    mode: Literal["forkserver", "cold"] = "forkserver"


def encode_line(message: BaseModel) -> bytes:
    return message.model_dump_json().encode() + b"\n"


def parse_child_message(line: bytes) -> Any:
    try:
        return _CHILD_ADAPTER.validate_json(line)
    except ValidationError as exc:
        raise ProtocolError(f"malformed message: {str(exc)[:300]}") from None


class LineReader:
    """Splits a byte stream into lines, refusing any line longer than `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        lines: list[bytes] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            lines.append(bytes(self._buf[:nl]))
            del self._buf[: nl + 1]
        if len(self._buf) > self.max_bytes or any(len(line) > self.max_bytes for line in lines):
            raise ProtocolError(f"message longer than {self.max_bytes} bytes")
        return lines

    @property
    def pending(self) -> int:
        return len(self._buf)


def send_ctl(sock: socket.socket, payload: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(payload).encode()
    if len(data) > CTL_MAX_BYTES:
        raise ProtocolError("control message too large")
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


def recv_ctl(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """One control message and its fds; None on EOF (peer gone)."""
    data, fds, _flags, _addr = socket.recv_fds(sock, CTL_MAX_BYTES, MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    try:
        payload = json.loads(data)
    except ValueError:
        raise ProtocolError("control message is not JSON") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise ProtocolError("control message has no type")
    return payload, fds


def send_with_credentials(sock: socket.socket, data: bytes) -> None:
    """Send `data` with our own pid/uid/gid attached; the kernel translates them for the receiver."""
    creds = _UCRED.pack(os.getpid(), os.getuid(), os.getgid())
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])


def recv_with_credentials(sock: socket.socket, bufsize: int) -> tuple[bytes, int | None]:
    """Receive bytes and the sender's pid in our pid namespace (needs SO_PASSCRED set before the send)."""
    data, ancdata, _flags, _addr = sock.recvmsg(bufsize, socket.CMSG_SPACE(_UCRED.size))
    pid = None
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
            pid = _UCRED.unpack(payload[: _UCRED.size])[0]
    return data, pid
