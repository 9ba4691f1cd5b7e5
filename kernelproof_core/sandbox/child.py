"""The disposable candidate process: forked by the fork server, armed, then handed to the pipeline.

Order matters. Before any candidate code runs, the child (still trusted code) detaches from the server's
session and file descriptors, tells the supervisor its pid (SCM_CREDENTIALS), points HOME/TMPDIR/
TRITON_CACHE_DIR at its own scratch, does the trusted start-up (CUDA context, CUPTI, warm-up kernel: a standby
child does this before its job exists), receives its job (by then the supervisor has placed it in its
cgroup), applies the job's settings, rlimits, landlock and seccomp, and reports what it applied ("armed").
Only then does `verify_candidate` load the candidate. Progress and results go to the supervisor as JSON lines
over the private result socket; stdout and stderr are plain capped pipes nobody parses.

The candidate runs in this same process, so it can write to the result socket too: the channel defeats fake
output on stdout, not in-process tampering (that is the cheat checks' job; see docs/SECURITY.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch
from pydantic import BaseModel

from kernelproof_core.report.models import CaseResult
from kernelproof_core.sandbox.limits import apply_rlimits
from kernelproof_core.sandbox.protocol import (
    CHILD_DROPPED_ENV,
    CONTINUE,
    AbortMsg,
    Armed,
    CaseDoneMsg,
    ChildRequest,
    DoneMsg,
    EnvironmentMsg,
    HarnessErrorMsg,
    Hello,
    PhaseMsg,
    PrecompiledMsg,
    ProtocolError,
    ServerConfig,
    encode_line,
    send_with_credentials,
)
from kernelproof_core.sandbox.triton_cache import install_entries

log = logging.getLogger(__name__)

EXIT_HARNESS_ERROR = 70
EXIT_ABORT = 71
MAX_REQUEST_BYTES = 16 * 1024 * 1024
ALWAYS_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
# CUDA's driver writes below /proc or /sys while it initialises: with landlock denying that, cuInit fails with error
# 304 (seen on the H200 host; scripts/sandbox_cuda_probe.py narrows it to these two trees). Granting landlock rights
# there adds little: /sys is a read-only bind in the sandbox, and /proc writes stay subject to procfs permissions
# for the unprivileged uid inside a private PID namespace.
CUDA_LANDLOCK_WRITE_PATHS = ("/proc", "/sys")


def landlock_extra_write_paths(device: str) -> tuple[str, ...]:
    return CUDA_LANDLOCK_WRITE_PATHS if device == "cuda" else ()


_synchronize = torch.cuda.synchronize  # bound in the fork server, before any candidate code exists


class ChannelEvents:
    """PipelineEvents that stream to the supervisor.

    In rendezvous mode (runs sharing a GPU: sandbox/arbiter.py) every phase boundary is a stop: the device is
    synchronized first, so nothing of this child is queued on the GPU while it waits, then the phase is reported and
    the child blocks until the supervisor's "continue"."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rendezvous = False
        self.cuda = False
        self.before_load: Callable[[], None] | None = None  # trusted work due right before the candidate loads

    @property
    def defer_measurement(self) -> bool:
        """Sharing the GPU: gates of every case first, then the timed phases back to back (pipeline._run_plan), so
        the arbiter hands this run the GPU once per candidate rather than once per case."""
        return self.rendezvous

    def send(self, message: BaseModel) -> None:
        self.sock.sendall(encode_line(message))

    def phase(self, name: str, case_id: str | None = None) -> None:
        if name == "load" and self.before_load is not None:
            self.before_load()
            self.before_load = None
        if self.rendezvous and self.cuda:
            _synchronize()
        self.send(PhaseMsg(name=name, case_id=case_id))
        if self.rendezvous:
            got = self.sock.recv(1)
            if got != CONTINUE:
                raise ProtocolError(f"expected the supervisor's continue, got {got!r}")

    def case_done(self, result: CaseResult) -> None:
        self.send(CaseDoneMsg(result=result))


def run_child(res_fd: int, out_fd: int, err_fd: int, scratch: str, config: ServerConfig,
              seed_files: dict[str, bytes], gpu: bool = True) -> NoReturn:
    """Entry point right after fork(); never returns. `gpu=False`: a precompile child (no CUDA start-up, no GPU
    device node it could open; it serves only a precompile request)."""
    code = 0
    events: ChannelEvents | None = None
    try:
        _detach(res_fd, out_fd, err_fd)
        sock = socket.socket(fileno=res_fd)
        events = ChannelEvents(sock)
        send_with_credentials(sock, encode_line(Hello()))
        cache = _prepare_home(Path(scratch), seed_files if gpu else {})
        if gpu:
            _start_up(config)  # trusted, before the job: a standby child is ready when its candidate arrives
        request = _read_request(sock)
        if (request.kind == "precompile") == gpu:
            raise ProtocolError(f"a {request.kind} request in a child forked {'with' if gpu else 'without'} the GPU")
        events.rendezvous, events.cuda = request.rendezvous, request.device == "cuda" and gpu
        _apply_settings(request)
        armed = _arm(request, config, scratch, gpu)
        if request.precompiled:  # written just before the candidate loads: after every harness kernel's compile
            fresh = _fresh_entries(cache, request.precompiled)
            events.before_load = lambda: _install_precompiled(cache, fresh)
            armed.notes.append(f"precompiled: {len(fresh)} of {len(request.precompiled)} cache files written "
                               "before load")
        events.send(armed)
        failed = [name for name in request.required_layers if name in armed.missing]
        if failed:
            raise RuntimeError(f"required isolation layers failed to apply: {', '.join(failed)}")
        _run(request, events, cache)
        events.send(DoneMsg())
    except Exception as exc:  # ours: the harness failed (or the candidate broke it; see docs/SECURITY.md)
        code = EXIT_HARNESS_ERROR
        if events is not None:
            with contextlib.suppress(Exception):
                events.send(HarnessErrorMsg(message=f"{type(exc).__name__}: {exc}"[:2000],
                                            traceback=traceback.format_exc()[-4000:]))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt... raised by candidate code
        code = EXIT_ABORT
        if events is not None:
            with contextlib.suppress(Exception):
                events.send(AbortMsg(exception=type(exc).__name__))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


def _detach(res_fd: int, out_fd: int, err_fd: int) -> None:
    """Own session and process group; stdin /dev/null; stdout/stderr to the capped pipes; no other fds."""
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    keep = {0, 1, 2, res_fd}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.set_inheritable(res_fd, False)


def _start_up(config: ServerConfig) -> None:
    """CUDA context, the cheat checks' first uses (CUPTI's start-up: 5.3-5.5 s on the H200 host), the trusted
    warm-up kernel. No job, campaign or candidate is known yet."""
    from kernelproof_core.pipeline import prepare_device

    prepare_device(config.device)


def _read_request(sock: socket.socket) -> ChildRequest:
    """The job; a standby child may wait for it indefinitely (the supervisor closing the channel ends the wait)."""
    sock.settimeout(None)
    buf = bytearray()
    while b"\n" not in buf:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ProtocolError("supervisor closed the channel before sending the job")
        buf += chunk
        if len(buf) > MAX_REQUEST_BYTES:
            raise ProtocolError("job request too large")
    sock.settimeout(None)
    line, _, _rest = bytes(buf).partition(b"\n")
    return ChildRequest.model_validate_json(line)


def _prepare_home(home: Path, seed_files: dict[str, bytes]) -> Path:
    """Own HOME, TMPDIR and Triton cache; seed the cache with trusted builds. Returns the cache directory."""
    tmp, cache = home / "tmp", home / "triton-cache"
    for d in (tmp, cache, home / ".cache"):
        d.mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(CHILD_DROPPED_ENV)}
    env.update(HOME=str(home), TMPDIR=str(tmp), TRITON_CACHE_DIR=str(cache), TRITON_HOME=str(home),
               XDG_CACHE_HOME=str(home / ".cache"))
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = str(tmp)
    os.chdir(home)
    install_entries(cache, seed_files)
    return cache


def _fresh_entries(cache: Path, files: dict[str, bytes]) -> dict[str, bytes]:
    """The candidate's own kernels, built ahead by its precompile child, are bytes from candidate code: they go
    only where that candidate could write itself, and never over an entry this child already has (the harness's)."""
    return {rel: data for rel, data in files.items() if not (cache / rel.split("/", 1)[0]).exists()}


def _install_precompiled(cache: Path, files: dict[str, bytes]) -> None:
    installed = install_entries(cache, files)
    log.info("precompiled cache: %d of %d files installed", installed, len(files))


def _apply_settings(request: ChildRequest) -> None:
    """The settings the pipeline reads, as the job's supervisor gave them."""
    os.environ.update(request.settings_env)
    from kernelproof_core.settings import get_settings

    get_settings.cache_clear()


def _arm(request: ChildRequest, config: ServerConfig, scratch: str, gpu: bool = True) -> Armed:
    """Apply this child's own layers; report exactly which took. Without `gpu` landlock grants nothing under /dev
    but the always-writable nodes: no GPU device node can even be opened for reading."""
    layers = ["scratch-dir", "own-triton-cache"]
    missing: list[str] = []
    notes: list[str] = []
    applied = apply_rlimits(request.limits)
    layers.append("rlimits")
    notes.append("rlimits: " + ",".join(applied))
    if config.landlock:
        try:
            from kernelproof_core.sandbox.landlock import restrict_self

            if gpu:
                devices = [*config.device_files, *ALWAYS_WRITABLE_DEVICES]
                read = config.read_paths
                write = [scratch, *landlock_extra_write_paths(request.device)]
            else:
                devices, write = list(ALWAYS_WRITABLE_DEVICES), [scratch]
                read = [p for p in config.read_paths if p != "/dev" and not p.startswith("/dev/")]
            layers += restrict_self(read, write, devices)
            if not gpu:
                layers.append("no-gpu")
        except OSError as exc:
            missing.append("landlock-fs")
            notes.append(f"landlock: {exc}")
    else:
        missing.append("landlock-fs")
    if config.seccomp:
        try:
            from kernelproof_core.sandbox.seccomp_filter import install_seccomp

            install_seccomp()
            layers.append("seccomp")
        except Exception as exc:  # libseccomp missing or refused
            missing.append("seccomp")
            notes.append(f"seccomp: {exc}")
    else:
        missing.append("seccomp")
    if _no_new_privs():
        layers.append("no-new-privs")
    else:
        missing.append("no-new-privs")
    return Armed(layers=layers, missing=missing, notes=notes)


def _no_new_privs() -> bool:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("NoNewPrivs:"):
                return line.split()[1] == "1"
    return False


def _run(request: ChildRequest, events: ChannelEvents, cache: Path) -> None:
    if request.kind == "precompile":
        _precompile(request, events, cache)
        return
    if request.kind == "environment":
        from kernelproof_core.environment import collect_environment

        env = collect_environment(request.device, measure_bandwidth=request.measure_bandwidth)
        events.send(EnvironmentMsg(environment=env))
        return
    from kernelproof_core.pipeline import verify_candidate

    if request.job is None or request.campaign is None:
        raise ProtocolError("verify request without job or campaign")
    verify_candidate(request.job, request.campaign, events)


def _precompile(request: ChildRequest, events: ChannelEvents, cache: Path) -> None:
    """Build the candidate's kernels for the request's target and send the cache entries back (precompile.py)."""
    from kernelproof_core.errors import CandidateFailure
    from kernelproof_core.precompile import PrecompileSummary, precompile_candidate
    from kernelproof_core.sandbox.triton_cache import read_entries

    if request.job is None or request.campaign is None or request.target is None:
        raise ProtocolError("precompile request without job, campaign or target")
    events.phase("load")
    try:
        summary = precompile_candidate(request.job, request.campaign, request.target.backend, request.target.arch,
                                       request.target.warp_size)
    except CandidateFailure as exc:  # its verification reports it; nothing to build
        summary = PrecompileSummary(failed=[f"load: {exc.message}"[:300]])
    files, dropped = read_entries(cache, max_bytes=request.precompile_max_bytes)
    events.send(PrecompiledMsg(files=files, calls=summary.calls, failed=summary.failed[:50],
                               launcher_errors=summary.launcher_errors[:10], dropped_entries=dropped))
