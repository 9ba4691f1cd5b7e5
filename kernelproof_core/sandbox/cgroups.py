"""Per-candidate cgroups: host memory and process-count limits, limit-hit counters, and an atomic tree kill.

The supervisor (outside the sandbox) creates `<own cgroup>/kernelproof/<id>` in each available controller,
moves the candidate's host pid in before the candidate's code runs, and removes the group afterwards. Nesting
under our own cgroup keeps whatever limits the operator gave the worker. Works with cgroup v1 (memory, pids,
freezer) and v2.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBTREE = "kernelproof"
V1_CONTROLLERS = ("memory", "pids", "freezer")


def cgroup_v2_root() -> Path | None:
    """The unified hierarchy when it is the only one mounted at /sys/fs/cgroup (pure v2 host)."""
    return CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else None


def own_cgroup_path(controller: str) -> str | None:
    """Our cgroup in `controller`'s hierarchy ("unified" for v2), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hid, controllers, path = parts
        if controller == "unified" and controllers == "":
            return path
        if controller in controllers.split(","):
            return path
    return None


def controller_base(controller: str) -> Path | None:
    """Where our per-candidate groups go for `controller`; None when that hierarchy is not mounted."""
    own = own_cgroup_path(controller)
    if own is None:
        return None
    mount = CGROUP_ROOT if controller == "unified" else CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    return mount / own.lstrip("/") / SUBTREE


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read_counter(path: Path, key: str) -> int:
    """`key N` from a flat-keyed cgroup file (memory.oom_control, memory.events, pids.events); 0 if absent."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class CandidateCgroup:
    """One candidate's cgroup(s). Every method is best effort and logs instead of raising, except `create`."""

    def __init__(self, name: str, version: int, memory_bytes: int | None, max_pids: int | None,
                 freezer: bool = True) -> None:
        self.name = name
        self.version = version
        self.memory_bytes = memory_bytes
        self.max_pids = max_pids
        self.dirs: dict[str, Path] = {}
        self.layers: list[str] = []
        self._want_freezer = freezer

    def create(self) -> None:
        """Create the groups and set limits; raises OSError when nothing could be created."""
        if self.version == 2:
            self._create_v2()
        else:
            self._create_v1()
        if not self.dirs:
            raise OSError("no cgroup could be created")

    def _create_v2(self) -> None:
        base = controller_base("unified")
        if base is None:
            return
        # Enable memory and pids down to our groups. The first write fails when our own cgroup holds processes and
        # is not a root (v2's no-internal-processes rule): then the groups have no limits, and reports say so. Start
        # the worker in a delegated cgroup (systemd Delegate=yes) to get them.
        for parent in (base.parent, base):
            parent.mkdir(exist_ok=True)
            for controller in ("+memory", "+pids"):
                with contextlib.suppress(OSError):
                    _write(parent / "cgroup.subtree_control", controller)
        group = base / self.name
        group.mkdir()
        self.dirs["unified"] = group
        if self.memory_bytes and (group / "memory.max").exists():
            _write(group / "memory.max", str(self.memory_bytes))
            with contextlib.suppress(OSError):
                _write(group / "memory.swap.max", "0")
            self.layers.append("cgroup-memory")
        if self.max_pids and (group / "pids.max").exists():
            _write(group / "pids.max", str(self.max_pids))
            self.layers.append("cgroup-pids")

    def _create_v1(self) -> None:
        for controller in V1_CONTROLLERS:
            if controller == "freezer" and not self._want_freezer:
                continue
            base = controller_base(controller)
            if base is None:
                continue
            try:
                base.mkdir(exist_ok=True)
                group = base / self.name
                group.mkdir()
            except OSError as exc:
                log.info("cgroup v1 %s unavailable: %s", controller, exc)
                continue
            self.dirs[controller] = group
            if controller == "memory" and self.memory_bytes:
                _write(group / "memory.limit_in_bytes", str(self.memory_bytes))
                # Swap accounting may be off; then there is no swap to escape to.
                with contextlib.suppress(OSError):
                    _write(group / "memory.memsw.limit_in_bytes", str(self.memory_bytes))
                self.layers.append("cgroup-memory")
            if controller == "pids" and self.max_pids:
                _write(group / "pids.max", str(self.max_pids))
                self.layers.append("cgroup-pids")

    def add(self, pid: int) -> None:
        for group in self.dirs.values():
            _write(group / "cgroup.procs", str(pid))

    def oom_kills(self) -> int:
        if "unified" in self.dirs:
            return _read_counter(self.dirs["unified"] / "memory.events", "oom_kill")
        if "memory" in self.dirs:
            return _read_counter(self.dirs["memory"] / "memory.oom_control", "oom_kill")
        return 0

    def pids_limit_hits(self) -> int:
        group = self.dirs.get("unified") or self.dirs.get("pids")
        return _read_counter(group / "pids.events", "max") if group else 0

    def procs(self) -> list[int]:
        pids: set[int] = set()
        for group in self.dirs.values():
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in (group / "cgroup.procs").read_text().split())
        return sorted(pids)

    def kill(self, timeout_s: float = 5.0) -> bool:
        """SIGKILL every process in the group; True once it is empty."""
        unified = self.dirs.get("unified")
        if unified is not None and (unified / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(unified / "cgroup.kill", "1")
        deadline = time.monotonic() + timeout_s
        freezer = self.dirs.get("freezer")
        while True:
            if freezer is not None:  # freeze first so nothing forks or exits-and-recycles its pid mid-sweep
                with contextlib.suppress(OSError):
                    _write(freezer / "freezer.state", "FROZEN")
            pids = self.procs()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if freezer is not None:
                with contextlib.suppress(OSError):
                    _write(freezer / "freezer.state", "THAWED")
            if not pids:
                return True
            if time.monotonic() > deadline:
                log.warning("cgroup %s still has %d processes after kill", self.name, len(pids))
                return False
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill()
        for controller, group in self.dirs.items():
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("could not remove cgroup %s (%s)", group, controller)
        self.dirs.clear()


def remove_subtrees() -> None:
    """Remove our (empty) `kernelproof` parent groups; a busy one stays (another executor still uses it)."""
    for controller in ("unified", *V1_CONTROLLERS):
        base = controller_base(controller)
        if base is not None:
            with contextlib.suppress(OSError):
                base.rmdir()
