"""Which sandbox layer stops CUDA from initialising on this host? An operator's diagnostic.

Starts the real bubblewrap view the sandbox would use and, inside it, tries `torch.cuda.init()` in a fresh forked
process after applying the child's layers one at a time (uid drop, rlimits, landlock, seccomp) and all together.
Prints one line per attempt. Run on a GPU host: python3 scripts/sandbox_cuda_probe.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

INNER = r'''
import os, sys, resource, ctypes.util
try:
    import pyseccomp  # noqa: F401  (before the uid drop: it imports lazily)
except ImportError:
    pass
import torch
from kernelproof_core.sandbox.limits import ResourceLimits, apply_rlimits
from kernelproof_core.sandbox.landlock import restrict_self
from kernelproof_core.sandbox.seccomp_filter import install_seccomp
from kernelproof_core.sandbox.child import ALWAYS_WRITABLE_DEVICES
from kernelproof_core.settings import get_settings
read_paths, devices = sys.argv[1].split(":"), sys.argv[2].split(":")
scratch = "/tmp" if os.path.isdir("/tmp") else "/"

def uid():
    os.setgid(65534); os.setuid(65534)
def rl():
    apply_rlimits(ResourceLimits.from_settings(get_settings()).for_child(False, False, "cuda"))
def ll():
    restrict_self(read_paths, [scratch], [*devices, *ALWAYS_WRITABLE_DEVICES])
def sc():
    install_seccomp()
import ctypes
from kernelproof_core.sandbox import landlock as L
def ll_variant(fs, net, scope, full=()):
    def apply():
        libc = ctypes.CDLL(None, use_errno=True)
        abi = L.landlock_abi()
        handled = L._mask(L.FS_RIGHTS, abi) if fs else 0
        attr = L._RulesetAttr(handled_access_fs=handled)
        attr.handled_access_net = (L.NET_BIND_TCP | L.NET_CONNECT_TCP) if net else 0
        attr.scoped = (L.SCOPE_ABSTRACT_UNIX_SOCKET | L.SCOPE_SIGNAL) if scope else 0
        rs = libc.syscall(L._SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(24), ctypes.c_uint32(0))
        assert rs >= 0, ctypes.get_errno()
        if fs:
            for p in read_paths:
                L._add(libc, rs, p, L._mask(L.READ, abi))
            for p in [*devices, *ALWAYS_WRITABLE_DEVICES]:
                L._add(libc, rs, p, L._mask(L.DEVICE, abi))
            for p in [scratch, *full]:
                L._add(libc, rs, p, handled)
        libc.prctl(38, 1, 0, 0, 0)
        assert libc.syscall(L._SYS_RESTRICT_SELF, rs, ctypes.c_uint32(0)) == 0, ctypes.get_errno()
    return apply
steps = {"none": [], "uid": [uid], "uid+rlimits": [uid, rl], "uid+landlock": [uid, ll], "uid+seccomp": [uid, sc],
         "all": [uid, rl, ll, sc],
         "ll-fs-only": [uid, ll_variant(True, False, False)],
         "ll-net-only": [uid, ll_variant(False, True, False)],
         "ll-scope-only": [uid, ll_variant(False, False, True)],
         "ll-fs+dev": [uid, ll_variant(True, False, False, ["/dev"])],
         "ll-fs+proc,sys": [uid, ll_variant(True, False, False, ["/proc", "/sys"])],
         "ll-fs+root": [uid, ll_variant(True, False, False, ["/"])],
         }
for name, preps in steps.items():
    pid = os.fork()
    if pid == 0:
        try:
            for p in preps:
                p()
            torch.cuda.init()
            x = torch.ones(4, device="cuda") * 2
            print(f"{name:16} OK   {x.sum().item()}", flush=True)
            os._exit(0)
        except BaseException as exc:
            print(f"{name:16} FAIL {exc!r}"[:400], flush=True)
            os._exit(1)
    os.waitpid(pid, 0)
'''


def main() -> None:
    from kernelproof_core.sandbox.launch import bwrap_prefix, make_plan
    from kernelproof_core.settings import get_settings

    settings = get_settings()
    plan = make_plan("cuda", settings, "forkserver")
    prefix = bwrap_prefix(plan, settings)
    view = plan.view
    sys.stdout.write(f"device nodes: {view.device_nodes}\nread paths: {view.read_paths}\n")
    sys.stdout.flush()
    args = [":".join(view.read_paths), ":".join(view.device_nodes)]
    sys.stdout.write("-- outside bwrap\n")
    sys.stdout.flush()
    subprocess.run([sys.executable, "-c", INNER, *args], env={**os.environ}, check=False)
    sys.stdout.write("-- inside bwrap\n")
    sys.stdout.flush()
    cmd = [*prefix, sys.executable, "-c", INNER, *args]
    subprocess.run(cmd, check=False)


if __name__ == "__main__":
    main()
