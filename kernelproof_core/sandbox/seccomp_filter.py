"""A seccomp deny-list for the candidate child, built with libseccomp (pyseccomp bindings).

Default allow, because torch, Triton, the CUDA driver and gcc need a long and version-dependent tail of
syscalls; the list below denies what a kernel candidate has no business doing: inspecting other processes,
changing mounts or namespaces, loading kernel code, reading kernel keys, and io_uring (whose operations bypass
seccomp). Denied calls fail with EPERM (the candidate sees an error it may handle) rather than killing the
process, so a library that merely probes a feature keeps working. The namespaces, read-only mounts and
landlock remain the primary walls; this filter shrinks the kernel attack surface behind them.
"""

from __future__ import annotations

import errno
import logging

log = logging.getLogger(__name__)

# syscall -> why it is denied
DENY: dict[str, str] = {
    "ptrace": "inspect or alter other processes (the fork server, other candidates)",
    "process_vm_readv": "read another process's memory",
    "process_vm_writev": "write another process's memory",
    "pidfd_getfd": "steal another process's file descriptors",
    "kcmp": "probe other processes' kernel objects",
    "mount": "change the filesystem view",
    "umount2": "change the filesystem view",
    "pivot_root": "change the filesystem view",
    "chroot": "change the filesystem view",
    "move_mount": "new mount API",
    "open_tree": "new mount API",
    "fsopen": "new mount API",
    "fsconfig": "new mount API",
    "fsmount": "new mount API",
    "fspick": "new mount API",
    "mount_setattr": "new mount API",
    "unshare": "create namespaces (user namespaces expose more kernel attack surface)",
    "setns": "join other namespaces",
    "bpf": "load eBPF programs",
    "perf_event_open": "performance counters: side channels, kernel attack surface",
    "userfaultfd": "a classic kernel-exploit primitive",
    "keyctl": "kernel keyrings",
    "add_key": "kernel keyrings",
    "request_key": "kernel keyrings",
    "kexec_load": "load a new kernel",
    "kexec_file_load": "load a new kernel",
    "init_module": "load kernel modules",
    "finit_module": "load kernel modules",
    "delete_module": "unload kernel modules",
    "reboot": "reboot the host",
    "swapon": "host swap configuration",
    "swapoff": "host swap configuration",
    "acct": "process accounting",
    "quotactl": "filesystem quotas",
    "syslog": "read the kernel log",
    "settimeofday": "set the clock (would skew timings)",
    "clock_settime": "set the clock (would skew timings)",
    "clock_adjtime": "adjust the clock (would skew timings)",
    "adjtimex": "adjust the clock (would skew timings)",
    "sethostname": "host identity",
    "setdomainname": "host identity",
    "name_to_handle_at": "file handles: escape a mount namespace",
    "open_by_handle_at": "file handles: escape a mount namespace",
    "lookup_dcookie": "kernel profiling interface",
    "iopl": "raw I/O port access",
    "ioperm": "raw I/O port access",
    "vhangup": "hang up the terminal",
    "io_uring_setup": "io_uring operations bypass seccomp",
    "io_uring_enter": "io_uring operations bypass seccomp",
    "io_uring_register": "io_uring operations bypass seccomp",
    "fanotify_init": "filesystem-wide event monitoring",
}

# clone(2) flags that create namespaces; clone with any of them is denied (arg 0 is the flags word).
CLONE_NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
TIOCSTI = 0x5412  # push bytes into the controlling terminal's input


def install_seccomp() -> list[str]:
    """Load the filter into the calling thread (call while single-threaded: children and threads inherit it).

    Returns the denied syscall names this architecture knows. Raises if libseccomp is missing or fails.
    """
    import pyseccomp as sc

    filt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    denied = []
    for name in DENY:
        try:
            filt.add_rule(eperm, name)
            denied.append(name)
        except (OSError, ValueError) as exc:  # unknown on this architecture
            log.debug("seccomp: skipping %s: %s", name, exc)
    for flag in CLONE_NAMESPACE_FLAGS.values():
        filt.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory, which seccomp cannot inspect; ENOSYS makes libc fall back to clone.
    try:
        filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        denied.append("clone3")
    except (OSError, ValueError):
        pass
    filt.add_rule(eperm, "ioctl", sc.Arg(1, sc.EQ, TIOCSTI))
    filt.load()
    return denied
