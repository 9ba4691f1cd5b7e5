"""The warm fork server: runs inside the sandbox, imports torch and Triton once (CUDA left uninitialised, so
forking stays safe), then forks one disposable child per candidate.

Started by the supervisor as `python -m kernelproof_core.sandbox.forkserver --ctl-fd N --config JSON`. It
speaks only on its control socket. Per request it creates the child's scratch directory, forks, reports the
child's pid, waits for it (pidfd) while honouring "kill" requests, then kills every leftover process in its
pid namespace, wipes the scratch area and reports the raw wait status. In cold mode it serves exactly one
request and exits.

The server drops to the sandbox uid before serving, is non-dumpable (a same-uid candidate cannot read its
memory or file descriptors through /proc) and is a child subreaper (orphans of a candidate come back to it to
be reaped).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import select
import shutil
import signal
import socket
import stat
import sys
import time
from pathlib import Path

from kernelproof_core.sandbox.protocol import ServerConfig, recv_ctl, send_ctl

log = logging.getLogger("kernelproof.sandbox.forkserver")

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
SWEEP_TIMEOUT_S = 5.0
WARM_MODULES = (
    "torch",
    "numpy",
    "triton",
    "triton.language",
    "triton.runtime.interpreter",
    "kernelproof_core.pipeline",
    "kernelproof_core.tasks",
    "kernelproof_core.environment",
    "kernelproof_core.sandbox.child",
    "kernelproof_core.sandbox.seccomp_filter",
    "kernelproof_core.sandbox.landlock",
    "pyseccomp",
)


def warm_imports() -> list[str]:
    import importlib

    failed = []
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # recorded; the child will fail loudly if it really needs it
            failed.append(f"{name}: {exc}")
    return failed


def prewarm_triton(config: ServerConfig) -> dict[str, bytes]:
    """Build Triton's CUDA helper module (gcc, ~1 s) once, trusted, and keep its cache files in memory.

    Each child writes them into its own fresh cache, so no candidate pays for the build and none can poison it
    for the others. Loading the module does not initialise CUDA.
    """
    if config.device != "cuda" or not config.prewarm_triton:
        return {}
    seed = Path(config.scratch_root) / ".seed"
    os.environ["TRITON_CACHE_DIR"] = str(seed)
    try:
        from triton.backends.nvidia.driver import CudaUtils

        CudaUtils()
        return {str(p.relative_to(seed)): p.read_bytes() for p in seed.rglob("*") if p.is_file()}
    except Exception as exc:
        log.warning("triton prewarm failed (children will build it themselves): %s", exc)
        return {}
    finally:
        os.environ.pop("TRITON_CACHE_DIR", None)
        shutil.rmtree(seed, ignore_errors=True)


def drop_privileges(config: ServerConfig) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if config.drop_to_uid is not None and os.getuid() == 0:
        gid = config.drop_to_gid if config.drop_to_gid is not None else config.drop_to_uid
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(config.drop_to_uid, config.drop_to_uid, config.drop_to_uid)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def serve(ctl: socket.socket, config: ServerConfig, seed: dict[str, bytes]) -> None:
    while True:
        got = recv_ctl(ctl)
        if got is None:
            return
        msg, fds = got
        if msg["type"] == "exit":
            return
        if msg["type"] != "run" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        if not handle_run(ctl, config, seed, str(msg["id"]), fds):
            return
        if config.mode == "cold":
            return


def handle_run(ctl: socket.socket, config: ServerConfig, seed: dict[str, bytes], run_id: str,
               fds: list[int]) -> bool:
    """Fork, supervise and clean up one child. False when the supervisor went away."""
    scratch = Path(config.scratch_root) / run_id
    scratch.mkdir(mode=0o700)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        from kernelproof_core.sandbox.child import run_child

        run_child(fds[0], fds[1], fds[2], str(scratch), config, seed)
    for fd in fds:
        os.close(fd)
    send_ctl(ctl, {"type": "started", "id": run_id, "pid": pid})
    pidfd = os.pidfd_open(pid)
    status: int | None = None
    supervisor_alive = True
    try:
        while status is None:
            watched = [pidfd, ctl.fileno()] if supervisor_alive else [pidfd]
            ready, _, _ = select.select(watched, [], [])
            if ctl.fileno() in ready:
                got = recv_ctl(ctl)
                if got is None:  # the supervisor is gone: nobody will read results; end the child
                    supervisor_alive = False
                if got is None or got[0].get("type") == "exit" or got[0].get("id") == run_id:
                    _kill_child(pid)
                    sweep(config)
            if pidfd in ready:
                _, status = os.waitpid(pid, 0)
    finally:
        os.close(pidfd)
    swept = sweep(config)
    wipe(Path(config.scratch_root))
    if supervisor_alive:
        send_ctl(ctl, {"type": "exited", "id": run_id, "status": status, "swept": swept})
    return supervisor_alive


def _kill_child(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill()


def sweep(config: ServerConfig) -> int:
    """Kill and reap every process left in our pid namespace (daemonised grandchildren included)."""
    killed = 0
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while config.sweep_pid_namespace:
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        _reap()
        if not others or time.monotonic() > deadline:
            break
        for pid in others:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.005)
    _reap()
    return killed


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return


def wipe(root: Path) -> None:
    """Remove everything under the scratch root, even what a candidate made unreadable."""

    def fix(_func: object, path: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            os.chmod(path, stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    for entry in list(root.iterdir()) if root.exists() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, onerror=fix)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ctl-fd", type=int, required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="forkserver %(levelname)s %(message)s")
    config = ServerConfig.model_validate_json(args.config)
    ctl = socket.socket(fileno=args.ctl_fd)
    os.set_inheritable(args.ctl_fd, False)
    if config.device == "interpreter":  # read by triton.language's own @jit functions at import time
        os.environ["TRITON_INTERPRET"] = "1"
    failed = warm_imports()
    seed = prewarm_triton(config)
    drop_privileges(config)
    Path(config.scratch_root).mkdir(parents=True, exist_ok=True)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        log.warning("fork server has %d threads; forking a multi-threaded process is unsafe", threads)
    send_ctl(ctl, {"type": "ready", "pid": os.getpid(), "uid": os.getuid(), "threads": threads,
                   "seed_files": len(seed),
                   "failed_imports": failed})
    serve(ctl, config, seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
