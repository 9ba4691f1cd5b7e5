"""The warm fork server: runs inside the sandbox, imports torch and Triton once (CUDA left uninitialised, so
forking stays safe), then forks one disposable child per candidate.

Started by the supervisor as `python -m kernelproof_core.sandbox.forkserver --ctl-fd N --config JSON`. It
speaks only on its control socket. Per request it creates the child's scratch directory, forks, reports the
child's pid and goes on serving; when a child ends (pidfd) it kills every leftover process in its pid namespace
outside the other live children's trees, wipes that child's scratch and reports the raw wait status. Several
children may live at once: the one running a candidate and standbys, forked ahead of their request so that their
trusted start-up (CUDA context, CUPTI, warm-up kernel) is done by the time a candidate arrives. In cold mode it
serves exactly one child and exits.

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
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kernelproof_core.sandbox.protocol import CHILD_DROPPED_ENV, ServerConfig, recv_ctl, send_ctl
from kernelproof_core.sandbox.triton_cache import read_entries

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


# Run in a separate process: it compiles and launches the harness's own kernels, which needs CUDA, and the server
# must not initialise CUDA before it forks.
_HARNESS_KERNELS = "from kernelproof_core.integrity.run import warm_up_process; warm_up_process('cuda')"
HARNESS_KERNELS_TIMEOUT_S = 300.0


def prewarm_triton(config: ServerConfig) -> dict[str, bytes]:
    """Build Triton's CUDA helper module (gcc, ~1 s) and the harness's own kernels (the warm-up kernel and the
    launch gate's wait kernel: ~1.3 s of compile for sm_90) once, trusted, and keep their cache files in memory.

    Each child writes them into its own fresh cache, so no candidate pays for the builds (a standby child's start-up
    shrinks by their compile time) and none can poison them for the others. The helper is built in this process
    (loading it does not initialise CUDA); the kernels in a short-lived subprocess with the environment a child
    compiles in (no KERNELPROOF_ or Triton cache variables), so that the child's cache keys match.
    """
    if config.device != "cuda" or not config.prewarm_triton:
        return {}
    seed = Path(config.scratch_root) / ".seed"
    os.environ["TRITON_CACHE_DIR"] = str(seed)
    try:
        from triton.backends.nvidia.driver import CudaUtils

        CudaUtils()
        _build_harness_kernels(seed)
        return read_entries(seed)[0]  # the child installs them with their group indexes moved
    except Exception as exc:
        log.warning("triton prewarm failed (children will build it themselves): %s", exc)
        return {}
    finally:
        os.environ.pop("TRITON_CACHE_DIR", None)
        shutil.rmtree(seed, ignore_errors=True)


def _build_harness_kernels(seed: Path) -> None:
    """Compile the harness's kernels into `seed`; a failure only costs each child the compile."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CHILD_DROPPED_ENV)}
    env["TRITON_CACHE_DIR"] = str(seed)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", _HARNESS_KERNELS], env=env, capture_output=True, text=True,
                          timeout=HARNESS_KERNELS_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        log.warning("harness kernels not prebuilt (children compile them): %s", proc.stderr[-2000:])


def drop_privileges(config: ServerConfig) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if config.drop_to_uid is not None and os.getuid() == 0:
        gid = config.drop_to_gid if config.drop_to_gid is not None else config.drop_to_uid
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(config.drop_to_uid, config.drop_to_uid, config.drop_to_uid)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@dataclass
class _Child:
    pid: int
    pidfd: int
    scratch: Path


def serve(ctl: socket.socket, config: ServerConfig, seed: dict[str, bytes]) -> None:
    """Serve "run" (fork a child on the given channels; with "gpu": false, a precompile child that skips the GPU
    start-up), "kill", "freeze"/"thaw" (SIGSTOP/SIGCONT a child that has not started its candidate: a standby
    warming up while another child is timed) and "exit" requests.
    Several children may live at once: the one running a candidate and standbys forked ahead of their request."""
    children: dict[str, _Child] = {}
    try:
        while True:
            by_fd = {c.pidfd: run_id for run_id, c in children.items()}
            ready, _, _ = select.select([ctl.fileno(), *by_fd], [], [])
            for fd in ready:
                if fd != ctl.fileno():
                    run_id = by_fd[fd]
                    _reap_child(ctl, config, children, run_id)
                    if config.mode == "cold":
                        return
            if ctl.fileno() in ready and not _on_request(ctl, config, seed, children):
                return
    finally:
        for run_id in list(children):
            _kill_child(children[run_id].pid)
        for child in children.values():
            os.close(child.pidfd)
        sweep(config)


def _on_request(ctl: socket.socket, config: ServerConfig, seed: dict[str, bytes],
                children: dict[str, _Child]) -> bool:
    """Handle one control message; False when the supervisor went away or asked us to exit."""
    got = recv_ctl(ctl)
    if got is None:
        return False
    msg, fds = got
    kind, run_id = msg.get("type"), str(msg.get("id"))
    if kind == "run" and len(fds) == 3 and run_id not in children:
        children[run_id] = fork_child(config, seed, run_id, fds, gpu=msg.get("gpu") is not False)
        send_ctl(ctl, {"type": "started", "id": run_id, "pid": children[run_id].pid})
        return True
    for fd in fds:
        os.close(fd)
    if kind == "exit":
        return False
    child = children.get(run_id)
    if child is not None and kind == "kill":
        _kill_child(child.pid)
    elif child is not None and kind in ("freeze", "thaw"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGSTOP if kind == "freeze" else signal.SIGCONT)
    return True


def fork_child(config: ServerConfig, seed: dict[str, bytes], run_id: str, fds: list[int], gpu: bool = True) -> _Child:
    """Fork one child on the supervisor's channels; `gpu=False`: a precompile child, which never starts CUDA."""
    scratch = Path(config.scratch_root) / run_id
    scratch.mkdir(mode=0o700)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        from kernelproof_core.sandbox.child import run_child

        run_child(fds[0], fds[1], fds[2], str(scratch), config, seed, gpu=gpu)
    for fd in fds:
        os.close(fd)
    return _Child(pid, os.pidfd_open(pid), scratch)


def _reap_child(ctl: socket.socket, config: ServerConfig, children: dict[str, _Child], run_id: str) -> None:
    """A child ended: reap it, kill what it left behind (sparing the other children's trees), wipe what it wrote,
    report its raw wait status."""
    child = children.pop(run_id)
    status: int | None = None
    with contextlib.suppress(ChildProcessError):
        _, status = os.waitpid(child.pid, 0)
    os.close(child.pidfd)
    spared = {c.pid for c in children.values()}
    swept = sweep(config, spared)
    wipe(Path(config.scratch_root), keep={c.scratch.name for c in children.values()})
    with contextlib.suppress(OSError):
        send_ctl(ctl, {"type": "exited", "id": run_id, "status": status, "swept": swept})


def _kill_child(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGCONT)  # a frozen child dies only once continued


def parent_pids() -> dict[int, int]:
    """pid -> parent pid of every process we can see."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat_line = Path(f"/proc/{name}/stat").read_text()
                out[int(name)] = int(stat_line[stat_line.rindex(")") + 2:].split()[1])
    return out


def process_trees(roots: set[int], parents: dict[int, int]) -> set[int]:
    """The roots and all their descendants. A candidate's orphans are re-parented to us (subreaper), never into
    another child's tree, so a live child's tree holds only what that child started."""
    inside = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in inside and pid not in inside:
                inside.add(pid)
                changed = True
    return inside


def sweep(config: ServerConfig, spared: set[int] | None = None) -> int:
    """Kill and reap every process left in our pid namespace (daemonised grandchildren included), except the
    trees of the other live children."""
    killed = 0
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while config.sweep_pid_namespace:
        keep = process_trees(spared, parent_pids()) if spared else set()
        others = [int(p) for p in os.listdir("/proc")
                  if p.isdigit() and int(p) not in (1, os.getpid()) and int(p) not in keep]
        _reap(keep)
        if not others or time.monotonic() > deadline:
            break
        for pid in others:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.005)
    _reap(process_trees(spared, parent_pids()) if spared else set())
    return killed


def _reap(keep: set[int]) -> None:
    """Reap our ended children, except those of `keep` (a live child's status belongs to its own pidfd)."""
    me = os.getpid()
    for pid, ppid in parent_pids().items():
        if ppid == me and pid not in keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def wipe(root: Path, keep: set[str] | None = None) -> None:
    """Remove everything under the scratch root but the live children's own directories (`keep`), even what a
    candidate made unreadable."""

    def fix(_func: object, path: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            os.chmod(path, stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    for entry in list(root.iterdir()) if root.exists() else []:
        if keep and entry.name in keep:
            continue
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
