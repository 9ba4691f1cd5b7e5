"""A stream of distinct honest candidates for the throughput benchmarks: the built-in with `kp_nonce = <unique int>`
as the first statement of every @triton.jit kernel, so each candidate has its own Triton cache key and source hash
and pays a fresh compile, as an RL fleet's candidates do; and the check that they really are distinct."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernelproof_core.candidate import source_sha256

NONCE_BASE = 7_340_033  # any value; candidate i of stream s gets NONCE_BASE + 1000 * s + i


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return name == "jit"


def honest_variant(source: str, nonce: int) -> str:
    """The source with `kp_nonce = <nonce>` as the first statement of every @triton.jit kernel (after a docstring).

    An unused local constant: no effect on what the kernel computes, but a different kernel source, hence a
    different Triton cache key (the key hashes the kernel's source) and a different candidate source hash."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    inserts: list[tuple[int, int]] = []  # (0-based line index, indentation)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            body = node.body
            first = body[1] if (len(body) > 1 and isinstance(body[0], ast.Expr)
                                and isinstance(body[0].value, ast.Constant)
                                and isinstance(body[0].value.value, str)) else body[0]
            if first.lineno == node.lineno:
                raise ValueError(f"kernel {node.name}: body on the def line, cannot insert a statement")
            inserts.append((first.lineno - 1, first.col_offset))
    if not inserts:
        raise ValueError("no @triton.jit kernel found in the candidate source")
    for index, indent in sorted(inserts, reverse=True):
        lines.insert(index, " " * indent + f"kp_nonce = {nonce}  # benchmark: unique kernel source, no effect\n")
    return "".join(lines)


CACHE_KEY_PROBE = r"""
import importlib.util, json, sys
from triton.runtime.jit import JITFunction

def unwrap(obj):
    for _ in range(4):  # autotune / heuristics wrap a JITFunction in .fn
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
    return None

keys = []
for i, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"kp_throughput_variant_{i}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernels = {name: unwrap(obj) for name, obj in vars(module).items()}
    keys.append({name: fn.cache_key for name, fn in kernels.items() if fn is not None})
print(json.dumps(keys))
"""


def triton_cache_keys(paths: list[Path]) -> list[dict[str, str]]:
    """Triton cache keys of every @triton.jit kernel in each file, computed in compiled mode (the interpreter has
    no cache keys) in a separate process; needs no GPU."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", CACHE_KEY_PROBE, *map(str, paths)], capture_output=True, text=True,
                          env=env, timeout=600, check=True)
    keys: list[dict[str, str]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return keys


def check_distinct(builtin: Path, streams: list[list[Path]]) -> dict[str, Any]:
    paths = [builtin] + [p for stream in streams for p in stream]
    keys = triton_cache_keys(paths)
    kernels = sorted(keys[0])
    distinct_keys = bool(kernels) and all(len({k.get(name) for k in keys}) == len(keys) and
                                          all(name in k for k in keys) for name in kernels)
    hashes = [source_sha256(p.read_bytes()) for p in paths]
    return {"kernels": kernels, "distinct_cache_keys": distinct_keys,
            "distinct_source_hashes": len(set(hashes)) == len(hashes), "files_checked": len(paths),
            "builtin_keys": keys[0]}
