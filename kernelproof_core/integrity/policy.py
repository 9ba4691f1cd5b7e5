"""Static policy: the second layer of cheat checks, a versioned table of AST rules applied before a source runs.

The runtime checks are the primary defence and must hold on their own. This layer exists so that a generator fleet
gets precise, early feedback ("no-concurrency (line 3): import threading") and so that the routes we know for
reaching the harness from inside its process (gc, frames, sys.modules, ctypes, dunder attributes, monkeypatching)
are closed before any candidate code executes. Any change to the tables below bumps POLICY_VERSION.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass

POLICY_VERSION = "kernelproof.policy.v1"

RULES: dict[str, str] = {
    "no-concurrency": "no threads, processes or async tasks: the work must be done inside the call",
    "no-introspection": "no interpreter internals: gc, inspect, sys, traceback, types, profilers, frame attributes",
    "no-native-code": "no native code besides Triton kernels: ctypes, cffi, C++ extensions, cupy, numba, custom ops",
    "no-process-env": "no environment, files, sockets or processes (os, pathlib, io, open(), ...)",
    "no-timers": "no clocks or timers: time, timeit, datetime, torch.cuda.Event, triton.testing",
    "no-dynamic-code": "no eval/exec/compile/__import__/importlib, globals()/vars(), computed getattr/setattr",
    "no-dunder-access": "no dunder attributes or names, nor strings naming them (__dict__, __globals__, ...)",
    "no-monkeypatching": "no assignment to attributes of imported modules or their members, no global torch state",
    "no-tensor-subclass": "no torch.Tensor subclasses, __torch_function__/__torch_dispatch__, as_subclass, modes",
    "no-streams": "no CUDA streams or graphs: kernels run on the caller's stream",
    "no-torch-compile": "no torch.compile, torch.jit, torch.fx or torch.export",
    "no-private-internals": "no private modules or attributes of torch/triton, no private top-level modules",
    "no-harness-access": "no access to the verifier (kernelproof_core, api, worker, tests) or strings naming it",
    "no-host-compute": "no computation off the device: numpy/scipy/jax, .numpy(), .cpu()",
    "import-not-allowed": "an installed module that is not on the allow-list",
}

ALLOWED_ROOTS = frozenset({
    "torch", "triton", "math", "functools", "itertools", "operator", "typing", "typing_extensions", "dataclasses",
    "enum", "abc", "collections", "__future__", "numbers", "random", "warnings", "contextlib", "statistics",
    "string", "re", "heapq", "bisect", "copy", "fractions", "decimal",
})

# Dotted prefixes (modules or attributes) and the rule they break. Matched on whole dotted components.
DENIED: dict[str, str] = {
    **dict.fromkeys(("threading", "_thread", "concurrent", "multiprocessing", "asyncio", "subprocess", "signal",
                     "sched", "torch.multiprocessing"), "no-concurrency"),
    **dict.fromkeys(("gc", "inspect", "sys", "traceback", "types", "dis", "code", "codeop", "weakref", "atexit",
                     "builtins", "faulthandler", "tracemalloc", "linecache", "torch.profiler",
                     "torch.autograd.profiler", "torch.cuda.profiler", "torch.cuda.nvtx"), "no-introspection"),
    **dict.fromkeys(("ctypes", "cffi", "mmap", "numba", "cupy", "pycuda", "cuda", "torch.utils.cpp_extension",
                     "torch.cuda.cudart", "torch.library", "torch.ops.load_library", "triton.compiler",
                     "triton.backends"), "no-native-code"),
    **dict.fromkeys(("os", "posix", "nt", "pathlib", "io", "shutil", "tempfile", "socket", "glob", "fcntl",
                     "resource", "pty", "select", "pickle", "marshal", "shelve"), "no-process-env"),
    **dict.fromkeys(("time", "timeit", "datetime", "torch.cuda.Event", "torch.Event", "triton.testing"),
                    "no-timers"),
    **dict.fromkeys(("importlib", "imp", "runpy", "pkgutil", "zipimport", "operator.attrgetter",
                     "operator.methodcaller"), "no-dynamic-code"),
    **dict.fromkeys(("torch.set_default_dtype", "torch.set_default_device", "torch.set_flush_denormal",
                     "torch.use_deterministic_algorithms", "torch.set_grad_enabled", "torch.backends"),
                    "no-monkeypatching"),
    **dict.fromkeys(("torch.overrides", "torch.Tensor.as_subclass"), "no-tensor-subclass"),
    **dict.fromkeys(("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
                     "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs", "torch.cuda.streams",
                     "torch.Stream", "torch.cuda.make_graphed_callables"), "no-streams"),
    **dict.fromkeys(("torch.compile", "torch.compiler", "torch.jit", "torch.fx", "torch.export"),
                    "no-torch-compile"),
    **dict.fromkeys(("triton.knobs", "triton.runtime.jit", "triton.runtime.interpreter", "triton.runtime.cache",
                     "triton.runtime.build"), "no-private-internals"),
    **dict.fromkeys(("numpy", "scipy", "jax", "tensorflow", "pandas"), "no-host-compute"),
    **dict.fromkeys(("kernelproof_core", "kernelproof", "api", "worker", "tests"), "no-harness-access"),
}

DENIED_BUILTINS: dict[str, str] = {
    **dict.fromkeys(("eval", "exec", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr"),
                    "no-dynamic-code"),
    **dict.fromkeys(("open", "input", "breakpoint", "exit", "quit", "help"), "no-process-env"),
}
DENIED_METHODS: dict[str, str] = {
    "numpy": "no-host-compute", "cpu": "no-host-compute", "as_subclass": "no-tensor-subclass",
    "_make_subclass": "no-tensor-subclass", "record_stream": "no-streams", "wait_stream": "no-streams",
}
INTROSPECTION_ATTRIBUTES = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next", "gi_frame", "gi_code",
    "cr_frame", "ag_frame", "co_code", "co_consts", "co_names",
})
ALLOWED_DUNDERS = frozenset({
    "__init__", "__name__", "__qualname__", "__doc__", "__call__", "__len__", "__getitem__", "__setitem__",
    "__iter__", "__next__", "__enter__", "__exit__", "__repr__", "__str__", "__eq__", "__hash__", "__post_init__",
    "__contains__", "__bool__", "__all__", "__file__", "__main__", "__future__", "__slots__",
})
TENSOR_SUBCLASS_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})
_DUNDER = re.compile(r"__[A-Za-z_][A-Za-z0-9_]*__")


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.rule} (line {self.line}): {self.detail}"


def check_source(text: str) -> list[Violation]:
    """Every violation in a source (empty: the policy holds). A source that does not parse has none: the loader
    reports its syntax error (compile_error), which is the more useful feedback."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    checker = _Checker()
    checker.visit(tree)
    return sorted(set(checker.violations), key=lambda v: (v.line, v.rule, v.detail))


def denied_rule(dotted: str) -> str | None:
    """The rule a dotted module or attribute path breaks, if any (longest matching prefix wins)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        rule = DENIED.get(".".join(parts[:i]))
        if rule:
            return rule
    if parts[0].startswith("_") and parts[0] != "__future__":
        return "no-private-internals"
    if parts[0] in ("torch", "triton") and any(p.startswith("_") and not _DUNDER.fullmatch(p) for p in parts[1:]):
        return "no-private-internals"
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted path of the module (member) it is bound to
        self.modules: set[str] = set()  # local names bound to modules: usable only as `module.attribute`

    def flag(self, rule: str, node: ast.AST, detail: str) -> None:
        self.violations.append(Violation(rule, getattr(node, "lineno", 0), detail))

    def check_dotted(self, dotted: str, node: ast.AST) -> None:
        rule = denied_rule(dotted)
        if rule:
            self.flag(rule, node, dotted)

    def check_import(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        rule = denied_rule(module)
        if rule:
            self.flag(rule, node, f"import {module}")
        elif root not in ALLOWED_ROOTS and importlib.util.find_spec(root) is not None:
            # A module that does not exist is left to fail at import (import_error says exactly that).
            self.flag("import-not-allowed", node, f"import {module}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_import(alias.name, node)
            name = alias.asname or alias.name.split(".")[0]
            self.aliases[name] = alias.name if alias.asname else name
            self.modules.add(name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.flag("import-not-allowed", node, "relative import")
            return
        self.check_import(node.module, node)
        for alias in node.names:
            if alias.name == "*":
                self.flag("no-dynamic-code", node, f"from {node.module} import *")
                continue
            full = f"{node.module}.{alias.name}"
            self.check_dotted(full, node)
            self.aliases[alias.asname or alias.name] = full
            if _is_module(full):
                self.modules.add(alias.asname or alias.name)

    def dotted(self, node: ast.expr) -> str | None:
        """The dotted path an expression names when it is rooted at an imported module, else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return ".".join([self.aliases[node.id], *reversed(parts)])
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _DUNDER.fullmatch(node.attr) and node.attr not in ALLOWED_DUNDERS:
            self.flag("no-dunder-access", node, f".{node.attr}")
        if node.attr in INTROSPECTION_ATTRIBUTES:
            self.flag("no-introspection", node, f".{node.attr}")
        dotted = self.dotted(node)
        if dotted is not None:
            self.check_dotted(dotted, node)
        if isinstance(node.value, ast.Name):
            self.check_name(node.value, as_base=True)
        else:
            self.visit(node.value)

    def visit_Name(self, node: ast.Name) -> None:
        self.check_name(node, as_base=False)

    def check_name(self, node: ast.Name, as_base: bool) -> None:
        if node.id in DENIED_BUILTINS:
            self.flag(DENIED_BUILTINS[node.id], node, node.id)
        elif _DUNDER.fullmatch(node.id) and node.id not in ALLOWED_DUNDERS:
            self.flag("no-dunder-access", node, node.id)
        elif not as_base and node.id in self.modules and isinstance(node.ctx, ast.Load):
            # A module passed around as a value escapes the attribute checks above.
            self.flag("no-dynamic-code", node, f"module {self.aliases[node.id]} used as a value")

    def visit_Expr(self, node: ast.Expr) -> None:
        if not isinstance(node.value, ast.Constant):  # docstrings and bare strings are not code
            self.visit(node.value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            for name in _DUNDER.findall(node.value):
                if name not in ALLOWED_DUNDERS:
                    self.flag("no-dunder-access", node, f"string naming {name}")
            if "kernelproof" in node.value.lower():
                self.flag("no-harness-access", node, "string naming the verifier")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(node.args) >= 2:
            name = node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.flag("no-dynamic-code", node, f"{func.id} with a computed attribute name")
            elif name.value.startswith("_"):
                self.flag("no-private-internals", node, f"{func.id}(..., {name.value!r})")
        if isinstance(func, ast.Name) and func.id == "type" and len(node.args) == 3:
            self.flag("no-tensor-subclass", node, "type(name, bases, dict) creates a class at run time")
        if isinstance(func, ast.Attribute) and func.attr in DENIED_METHODS and self.dotted(func) is None:
            self.flag(DENIED_METHODS[func.attr], node, f".{func.attr}()")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.check_target(target)
        dotted = self.dotted(node.value) if isinstance(node.value, (ast.Attribute, ast.Name)) else None
        if dotted is not None:  # `T = torch.Tensor` makes T an alias whose attributes are guarded too
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = dotted
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.check_target(target)
        self.generic_visit(node)

    def check_target(self, target: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element)
        elif isinstance(target, ast.Attribute) and self.dotted(target) is not None:
            self.flag("no-monkeypatching", target, f"assignment to {self.dotted(target)}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            dotted = self.dotted(base) or ""
            if dotted.startswith("torch") and dotted.rsplit(".", 1)[-1] in ("Tensor", "TensorBase", "_TensorBase"):
                self.flag("no-tensor-subclass", node, f"class {node.name}({dotted})")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in TENSOR_SUBCLASS_HOOKS:
            self.flag("no-tensor-subclass", node, f"def {node.name}")
        self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.flag("no-concurrency", node, f"async def {node.name}")
        self.generic_visit(node)


def _is_module(dotted: str) -> bool:
    """Whether `from a import b` binds a module. Only reached for allowed roots, whose import is harmless."""
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError, AttributeError):
        return False
