"""What the sandbox can see: read-only software paths derived from this interpreter (never hard-coded to one
machine), the assigned GPU's device nodes, a private scratch tmpfs, and a cleared environment. Builds the
bwrap command line.

Derived read-only paths: /usr and the /lib*, /bin, /sbin entries (bound, or recreated as symlinks on
merged-/usr hosts), the venv (sys.prefix), the base interpreter (sys.base_prefix), the site-packages holding
torch and triton, the harness package directory itself (not the repository around it: that may hold .env
files), a short list of /etc files the dynamic linker and compilers need, CUDA/driver directories (CUDA_HOME,
/usr/local/nvidia, LD_LIBRARY_PATH, ld.so.conf.d entries) and settings.sandbox_extra_ro_paths.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import kernelproof_core

SCRATCH_ROOT = "/scratch"  # inside the sandbox: tmpfs, the only writable place
HOSTNAME = "kernelproof-sandbox"

TOP_LEVEL = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
             "localtime")
DRIVER_DIRS = ("/usr/local/nvidia", "/usr/local/cuda")
SOFTWARE_MODULES = ("torch", "triton", "numpy", "pydantic", "pyseccomp")
# Variables copied from the worker when set: locations of tools, never credentials.
ENV_PASSTHROUGH = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH",
                   "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH", "TRITON_LIBDEVICE_PATH", "CC")
# name -> (value, why)
ENV_FIXED: dict[str, tuple[str, str]] = {
    "LANG": ("C.UTF-8", "deterministic text encoding"),
    "PYTHONDONTWRITEBYTECODE": ("1", "read-only software paths: do not try to write .pyc files"),
    "PYTHONNOUSERSITE": ("1", "no per-user site-packages"),
    "OPENBLAS_NUM_THREADS": ("1", "keeps the fork server single-threaded, so forking it is safe"),
    "HOME": (SCRATCH_ROOT, "the server's home; each candidate gets its own scratch as HOME"),
    "TMPDIR": (SCRATCH_ROOT, "temporary files stay in the scratch tmpfs"),
}
GPU_SHARED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


@dataclass
class SandboxView:
    ro_binds: list[str]  # host path == sandbox path
    symlinks: list[tuple[str, str]]  # (target, link)
    device_nodes: list[str]
    env: dict[str, str]
    pythonpath: str
    read_paths: list[str] = field(default_factory=list)  # what landlock lets candidates read


def _module_root(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    return origin.parent.parent if origin.name == "__init__.py" else origin.parent


def _ld_conf_dirs() -> list[Path]:
    out = []
    conf = Path("/etc/ld.so.conf.d")
    for f in sorted(conf.glob("*.conf")) if conf.is_dir() else []:
        try:
            out += [Path(line.strip()) for line in f.read_text().splitlines() if line.strip().startswith("/")]
        except OSError:
            continue
    return out


def gpu_device_nodes(index: int) -> list[str]:
    return [p for p in (f"/dev/nvidia{index}", *GPU_SHARED_NODES) if os.path.exists(p)]


def toolchain_bin_dirs() -> list[Path]:
    """Directories of the C compiler Triton builds its launcher with ($CC, else gcc/cc on PATH), when outside
    the standard top-level paths (the H200 image keeps gcc under /opt/gcc)."""
    out: list[Path] = []
    for name in (os.environ.get("CC"), "gcc", "cc"):
        found = shutil.which(name) if name else None
        if not found:
            continue
        # Both the name as configured (what Triton will exec) and where a symlink leads.
        for bin_dir in (Path(found).parent, Path(found).resolve().parent):
            if not any(str(bin_dir).startswith(top + "/") for top in TOP_LEVEL):
                out.append(bin_dir)
    return list(dict.fromkeys(out))


def derive_view(device: str, gpu_index: int, extra_ro: list[Path]) -> SandboxView:
    """Everything the sandbox needs to see, derived from this interpreter and the environment."""
    harness = Path(kernelproof_core.__file__).resolve().parent
    wanted: list[Path] = [Path(p) for p in TOP_LEVEL]
    wanted += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent, harness]
    wanted += [r for r in (_module_root(m) for m in SOFTWARE_MODULES) if r is not None]
    wanted += [Path("/etc") / f for f in ETC_FILES]
    if device == "cuda":
        wanted += [Path(p) for p in DRIVER_DIRS]
        wanted += [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
        wanted += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p.startswith("/")]
        wanted += _ld_conf_dirs()
    toolchain = toolchain_bin_dirs()
    wanted += [d.parent for d in toolchain]  # the compiler's whole prefix: it runs cc1/as/ld from there
    wanted += extra_ro
    # Directories on the worker's PYTHONPATH (e.g. a --target dir of wheels) are software too; the repository root
    # is not (it may hold .env files): only the harness package directory inside it is bound.
    pythonpath = [str(harness.parent)]
    for entry in os.environ.get("PYTHONPATH", "").split(":"):
        if entry.startswith("/") and Path(entry).is_dir() and Path(entry).resolve() != harness.parent:
            pythonpath.append(str(Path(entry).resolve()))
            wanted.append(Path(entry))
    binds: list[str] = []
    symlinks: list[tuple[str, str]] = []
    for path in wanted:
        if not path.exists():
            continue
        if path.is_symlink() and str(path) in TOP_LEVEL:  # merged /usr: /lib -> usr/lib
            symlinks.append((os.readlink(path), str(path)))
            continue
        binds.append(str(path.resolve()))
    binds = _outermost(binds)
    env = {k: v for k, (v, _why) in ENV_FIXED.items()}
    env.update({k: os.environ[k] for k in ENV_PASSTHROUGH if os.environ.get(k)})
    bin_dirs = [str(Path(sys.prefix) / "bin"), *map(str, toolchain), "/usr/local/bin", "/usr/bin", "/bin"]
    env["PATH"] = ":".join(dict.fromkeys(bin_dirs))
    env["PYTHONPATH"] = ":".join(dict.fromkeys(pythonpath))
    if device == "interpreter":  # must be set before triton.language is first imported (its own @jit functions)
        env["TRITON_INTERPRET"] = "1"
    nodes = gpu_device_nodes(gpu_index) if device == "cuda" else []
    read_paths = _outermost(binds + [link for _t, link in symlinks] + ["/proc", "/sys", "/dev"])
    return SandboxView(binds, symlinks, nodes, env, env["PYTHONPATH"], read_paths)


def _outermost(paths: list[str]) -> list[str]:
    """Drop duplicates and paths inside another listed path."""
    out: list[str] = []
    for p in sorted(set(paths), key=lambda s: (s.count("/"), s)):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return sorted(out)


def bwrap_argv(bwrap: str, view: SandboxView, *, as_root: bool, uid: int, gid: int,
               scratch_bytes: int) -> list[str]:
    """The bubblewrap command line (up to and including "--"); the server command follows it."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--clearenv", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", HOSTNAME]
    if as_root:
        # No user namespace: the server starts as root without capabilities except the two it needs to drop to
        # `uid` (a real, unprivileged host uid) before serving anything.
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--disable-userns"]
    made: set[str] = set()
    for path in view.ro_binds:
        argv += _parents(path, made)
        argv += ["--ro-bind", path, path]
    for target, link in view.symlinks:
        argv += ["--symlink", target, link]
    argv += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys"]
    for node in view.device_nodes:
        argv += ["--dev-bind", node, node]
    argv += ["--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", SCRATCH_ROOT]
    argv += ["--remount-ro", "/", "--chdir", SCRATCH_ROOT]  # the root tmpfs bwrap built: read-only
    for key, value in sorted(view.env.items()):
        argv += ["--setenv", key, value]
    return [*argv, "--"]


def _parents(path: str, made: set[str]) -> list[str]:
    """bwrap creates missing parents of a mount point with mode 0700; make them traversable (0755) first."""
    out: list[str] = []
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        parent = "/" + "/".join(parts[:i])
        if parent not in made:
            made.add(parent)
            out += ["--perms", "0755", "--dir", parent]
    return out


def clean_env(view: SandboxView, scratch_root: str) -> dict[str, str]:
    """The environment for a server started without bwrap (degraded mode)."""
    env = dict(view.env)
    env["HOME"] = env["TMPDIR"] = scratch_root
    return env
