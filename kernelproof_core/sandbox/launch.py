"""How fork servers are started on this host: the launch plan (bwrap or degraded, root or not, which layers that
gives every candidate) and the command that starts one server.

Root workers start bwrap without a user namespace and let the server drop to `sandbox_uid`, a real unprivileged
host uid (so RLIMIT_NPROC, file permissions and signals treat it as nobody). Non-root workers get a user
namespace instead; the candidate then runs as the worker's own uid on the host, recorded as "separate-user"
missing. Without a working bwrap the server runs as a plain subprocess with a cleared environment: the per-child
layers (rlimits, landlock, seccomp, cgroups) still apply and the report lists the namespaces as missing.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof_core.campaign import Device
from kernelproof_core.sandbox.layers import HostLayers, probe_host
from kernelproof_core.sandbox.mounts import SCRATCH_ROOT, SandboxView, bwrap_argv, clean_env, derive_view
from kernelproof_core.sandbox.protocol import ServerConfig
from kernelproof_core.sandbox.server import ServerProcess
from kernelproof_core.settings import TEARDOWN_CUPTI, Settings

log = logging.getLogger(__name__)

NAMESPACE_LAYERS = ("bwrap", "mount-namespace", "pid-namespace", "network-namespace", "ipc-namespace")
ALWAYS = ("process", "clean-environment", "watchdog", "output-cap", "result-channel")
SERVER_MODULE = "kernelproof_core.sandbox.forkserver"


@dataclass
class LaunchPlan:
    """How servers for one device are started on this host, and the layers that gives every candidate."""

    device: Device
    mode: str  # forkserver | cold
    host: HostLayers
    view: SandboxView
    use_bwrap: bool
    as_root: bool
    layers: list[str]
    notes: list[str] = field(default_factory=list)
    host_scratch: Path | None = None  # degraded mode only: a host directory instead of the scratch tmpfs


def make_plan(device: Device, settings: Settings, mode: str) -> LaunchPlan:
    """Probe the host (cached) and decide how to start servers for `device`; never raises."""
    host = probe_host(settings.sandbox_bwrap_path)
    if device == "cuda":
        ensure_nvidia_uvm()
    view = derive_view(device, settings.sandbox_gpu_index, list(settings.sandbox_extra_ro_paths))
    if device == "cuda" and settings.profiler_teardown_cupti:
        view.env[TEARDOWN_CUPTI] = "1"  # read by kineto in the children; must be there before their first session
    as_root = os.geteuid() == 0
    plan = LaunchPlan(device, mode, host, view, use_bwrap=False, as_root=as_root,
                      layers=[*ALWAYS, "forkserver" if mode == "forkserver" else "cold-start"],
                      notes=list(host.notes))
    if host.bwrap_path is not None:
        ok, why = bwrap_works(plan, settings)
        plan.use_bwrap = ok
        if not ok:
            plan.notes.append(f"bwrap unusable here: {why}")
    if plan.use_bwrap:
        plan.layers += NAMESPACE_LAYERS
        if not as_root:
            plan.layers.append("user-namespace")
        if device == "cuda" and f"/dev/nvidia{settings.sandbox_gpu_index}" in view.device_nodes:
            plan.layers.append("gpu-device-node")
    else:
        plan.host_scratch = Path(tempfile.mkdtemp(prefix="kernelproof-scratch-"))
        if as_root:
            os.chown(plan.host_scratch, settings.sandbox_uid, settings.sandbox_gid)
        log.warning("sandbox degraded (no bwrap): %s", "; ".join(plan.notes))
    return plan


def ensure_nvidia_uvm() -> None:
    """/dev/nvidia-uvm appears when the UVM module loads, normally through the setuid nvidia-modprobe on the first
    CUDA use; that cannot happen inside the sandbox (no-new-privs, read-only /dev), so do it here, best effort."""
    if os.path.exists("/dev/nvidia-uvm"):
        return
    tool = shutil.which("nvidia-modprobe")
    if tool is None:
        log.warning("/dev/nvidia-uvm missing and nvidia-modprobe not found: CUDA may fail inside the sandbox")
        return
    try:
        subprocess.run([tool, "-u", "-c=0"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("nvidia-modprobe failed: %s", exc)


def bwrap_prefix(plan: LaunchPlan, settings: Settings) -> list[str]:
    assert plan.host.bwrap_path is not None
    return bwrap_argv(plan.host.bwrap_path, plan.view, as_root=plan.as_root, uid=settings.sandbox_uid,
                      gid=settings.sandbox_gid, scratch_bytes=settings.sandbox_scratch_bytes)


def bwrap_env() -> dict[str, str]:
    """bwrap's own environment (it clears the sandbox's with --clearenv anyway)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def bwrap_works(plan: LaunchPlan, settings: Settings) -> tuple[bool, str]:
    """Can bwrap start our interpreter with the harness importable, exactly as the servers will be started?"""
    argv = [*bwrap_prefix(plan, settings), sys.executable, "-P", "-s", "-c", "import kernelproof_core"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=60, env=bwrap_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr.decode(errors="replace")[-500:]


def _reachable_by_others(paths: list[str]) -> bool:
    """Can an unrelated uid traverse to every path (execute bit for others on each ancestor directory)?"""
    for path in paths:
        current = Path(path)
        for directory in [*reversed(current.parents), current]:
            try:
                st = directory.stat()
            except OSError:
                break
            if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IXOTH:
                return False
    return True


def start_server(plan: LaunchPlan, settings: Settings) -> ServerProcess:
    """Start one fork server and wait until it is warm. Raises SandboxStartError."""
    scratch = SCRATCH_ROOT if plan.use_bwrap else str(plan.host_scratch)
    drop = plan.as_root and (plan.use_bwrap or _reachable_by_others(plan.view.read_paths))
    if plan.as_root and not drop:
        # Degraded mode sees the host filesystem: if the software lives under a directory other users cannot
        # traverse (a 0700 checkout), uid 65534 could not even import the harness. Run as the worker's uid and say so.
        note = "software paths not reachable by the sandbox uid: candidate runs as the worker's uid"
        if note not in plan.notes:
            plan.notes.append(note)
    config = ServerConfig(
        device=plan.device,
        scratch_root=scratch,
        drop_to_uid=settings.sandbox_uid if drop else None,
        drop_to_gid=settings.sandbox_gid if drop else None,
        sweep_pid_namespace=plan.use_bwrap,
        read_paths=plan.view.read_paths,
        device_files=plan.view.device_nodes,
        prewarm_triton=settings.sandbox_seed_triton_cache and plan.mode == "forkserver",
        landlock=plan.host.landlock_abi > 0,
        seccomp=plan.host.seccomp,
        mode="forkserver" if plan.mode == "forkserver" else "cold",
    )
    cmd = [sys.executable, "-P", "-s", "-m", SERVER_MODULE, "--config", config.model_dump_json()]
    if plan.use_bwrap:
        prefix, env = bwrap_prefix(plan, settings), bwrap_env()
    else:
        prefix, env = [], clean_env(plan.view, scratch)
        if plan.device == "cuda":  # not a boundary; all we can do without a mount namespace
            env["CUDA_VISIBLE_DEVICES"] = str(settings.sandbox_gpu_index)
    started = time.monotonic()
    server = ServerProcess.spawn(prefix, cmd, env)
    ready = server.wait_ready(settings.sandbox_startup_timeout_s)
    log.info("fork server ready in %.2f s: %s", time.monotonic() - started, ready)
    return server
