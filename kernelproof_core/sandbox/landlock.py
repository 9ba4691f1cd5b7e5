"""Landlock (kernel LSM, unprivileged): the per-candidate walls a forked child cannot get from bubblewrap.

Every candidate forked from one warm server shares that server's mount namespace, so the mount namespace alone
cannot keep a candidate out of the scratch area of the next one. Landlock can, per process and without
privileges: the child may read the read-only software paths, read and write only its own scratch directory,
open the device nodes it was given, and (ABI >= 4) make no TCP connections; with ABI >= 6 it also cannot
signal processes outside its own domain (the fork server) or reach their abstract unix sockets. Applied with
raw syscalls (stable numbers on x86_64 and aarch64); the rights requested are trimmed to the running kernel's
ABI.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterable

from kernelproof_core.sandbox.layers import LANDLOCK_NET_ABI, LANDLOCK_SCOPE_ABI, landlock_abi

log = logging.getLogger(__name__)

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights by the ABI that introduced them.
FS_RIGHTS: dict[str, tuple[int, int]] = {  # name -> (bit, abi)
    "execute": (1 << 0, 1),
    "write_file": (1 << 1, 1),
    "read_file": (1 << 2, 1),
    "read_dir": (1 << 3, 1),
    "remove_dir": (1 << 4, 1),
    "remove_file": (1 << 5, 1),
    "make_char": (1 << 6, 1),
    "make_dir": (1 << 7, 1),
    "make_reg": (1 << 8, 1),
    "make_sock": (1 << 9, 1),
    "make_fifo": (1 << 10, 1),
    "make_block": (1 << 11, 1),
    "make_sym": (1 << 12, 1),
    "refer": (1 << 13, 2),
    "truncate": (1 << 14, 3),
    # ioctl_dev (ABI 5) is deliberately not handled: the CUDA driver lives on device ioctls.
}
_FILE_ONLY = {"execute", "write_file", "read_file", "truncate"}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = ("execute", "read_file", "read_dir")
DEVICE = ("read_file", "write_file", "truncate")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    pass


def _mask(names: Iterable[str], abi: int) -> int:
    return sum(FS_RIGHTS[n][0] for n in set(names) if n in FS_RIGHTS and FS_RIGHTS[n][1] <= abi)


def restrict_self(read_paths: Iterable[str], write_paths: Iterable[str],
                  device_files: Iterable[str]) -> list[str]:
    """Restrict this process (and its future children) for good. Returns the landlock layers applied."""
    abi = landlock_abi()
    if abi < 1:
        raise LandlockError("landlock unavailable")
    libc = ctypes.CDLL(None, use_errno=True)
    handled = _mask(FS_RIGHTS, abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    layers = ["landlock-fs"]
    if abi >= LANDLOCK_NET_ABI:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP  # no rule grants them: all TCP denied
        size = 16
        layers.append("landlock-net")
    if abi >= LANDLOCK_SCOPE_ABI:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
        layers.append("landlock-scope")
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in read_paths:
            _add(libc, ruleset, path, _mask(READ, abi))
        for path in device_files:
            _add(libc, ruleset, path, _mask(DEVICE, abi))
        for path in write_paths:
            _add(libc, ruleset, path, handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return layers


def _add(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        log.debug("landlock: %s does not exist; no rule", path)
        return
    try:
        if not os.path.isdir(path):
            access &= _mask(_FILE_ONLY, 99)
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        rc = libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
        if rc != 0:
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
