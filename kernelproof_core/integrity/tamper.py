"""Tamper checks: the harness, the timers and the process look the same after candidate code ran as before.

A snapshot taken before the candidate's module executes records the identity of every function, class and module
reachable from the watched modules (timers, torch, Triton's launch path, the verifier's own modules), the code
objects of Python functions, the attributes of watched classes, the values of the verifier's tables, the torch
function/dispatch mode stacks and trace/profile hooks, and the live threads. After every candidate call the process
is compared with it; any difference is `tampering` (a patched timer, a rewritten tolerance, a lazy mode computing
inside the checker, a thread left running after the call returned). Additions to third-party modules are ignored
(torch and Triton import submodules lazily); additions to watched classes are not (shadowing an inherited method).
"""

from __future__ import annotations

import _thread
import gc
import operator
import pickle
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.verdicts import Verdict

# Third-party modules whose callables, classes and submodules are compared by identity.
WATCHED_MODULES = (
    "time", "builtins", "threading", "gc", "torch", "torch.cuda", "torch.nn.functional", "torch.cuda.streams",
    "triton", "triton.testing", "triton.language", "triton.runtime.jit", "triton.runtime.autotuner",
    "triton.runtime.interpreter",
    # The profiler whose record the GPU checks read (foreign kernels, work outside the timed region): a profile class
    # or event list swapped or patched could hand back a record without the kernels that did the work.
    "torch.profiler", "torch.profiler.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util",
)
# Classes whose methods are compared (additions included). Triton's launch path is watched by launches.py.
WATCHED_CLASSES = (
    ("torch", "Tensor"), ("torch.cuda.streams", "Event"), ("torch.cuda.streams", "Stream"), ("threading", "Thread"),
    ("triton.runtime.autotuner", "Autotuner"), ("torch.profiler.profiler", "profile"),
    ("torch.profiler.profiler", "_KinetoProfile"), ("torch.autograd.profiler", "profile"),
    ("torch.autograd.profiler_util", "EventList"), ("torch.autograd.profiler_util", "FunctionEvent"),
    ("torch.autograd.profiler_util", "Interval"),
)
HARNESS_PACKAGE = "kernelproof_core"
# Verifier modules a candidate run can reach, besides the service and the sandbox (those run elsewhere or before).
HARNESS_SKIP = ("kernelproof_core.sandbox", "kernelproof_core.store", "kernelproof_core.cli", "kernelproof_core.client")


def _harness_modules() -> Iterator[tuple[str, types.ModuleType]]:
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == HARNESS_PACKAGE and not name.startswith(HARNESS_SKIP) and module is not None:
            yield name, module


def _watched(obj: Any) -> bool:
    return callable(obj) or isinstance(obj, (type, types.ModuleType))


def _class_methods(cls: type) -> dict[str, Any]:
    # Functions and descriptors only: pydantic and friends set plain attributes on their classes lazily.
    return {k: v for k, v in vars(cls).items() if isinstance(v, _METHOD_TYPES)}


_METHOD_TYPES = (types.FunctionType, staticmethod, classmethod, property, types.BuiltinFunctionType,
                 types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType)


def _function_parts(obj: Any) -> tuple[Any, ...]:
    return (getattr(obj, "__code__", None), getattr(obj, "__defaults__", None), getattr(obj, "__kwdefaults__", None))


_parts_of = operator.attrgetter("__code__", "__defaults__", "__kwdefaults__")  # every Python function has all three


@dataclass(frozen=True, slots=True)
class _Index:
    """The snapshot regrouped for a quick whole-process comparison at C speed (map/operator, no per-entry Python).
    The auditor checks the harness after every timing sample (~3,400 entries and ~80 classes for a torch process),
    inside the GPU's exclusive phase; the per-entry loop of `changes` cost ~11 ms a check on the H200 host. Only when
    the quick comparison finds a difference does `changes` walk the entries to name it."""

    modules: tuple[tuple[str, tuple[str, ...], tuple[Any, ...]], ...]  # module name, attributes, their values
    functions: tuple[Any, ...]
    parts: tuple[tuple[Any, ...], ...]
    classes: tuple[tuple[str, str, type | None, tuple[str, ...], tuple[Any, ...], frozenset[str]], ...]

    @classmethod
    def build(cls, entries: dict[str, Any], parts: dict[str, tuple[Any, ...]],
              classes: dict[str, dict[str, Any]]) -> _Index:
        grouped: dict[str, tuple[list[str], list[Any]]] = {}
        for key, value in entries.items():
            mod_name, _, attr = key.rpartition(".")
            names, values = grouped.setdefault(mod_name, ([], []))
            names.append(attr)
            values.append(value)
        funcs = tuple(entries[k] for k in parts)
        class_rows = []
        for key, methods in classes.items():
            mod_name, _, attr = key.rpartition(".")
            owner = getattr(sys.modules.get(mod_name), attr, None)
            class_rows.append((mod_name, attr, owner if isinstance(owner, type) else None, tuple(methods),
                               tuple(methods.values()), frozenset(methods)))
        return cls(tuple((m, tuple(n), tuple(v)) for m, (n, v) in grouped.items()), funcs,
                   tuple(parts[k] for k in parts), tuple(class_rows))

    def intact(self) -> bool:
        """True when every entry, function body and watched class method is the object it was (no false True)."""
        for mod_name, names, values in self.modules:
            module = sys.modules.get(mod_name)
            if module is None:
                return False
            if not all(map(operator.is_, map(vars(module).get, names, repeat(_MISSING)), values)):
                return False
        if list(map(_parts_of, self.functions)) != list(self.parts):
            return False
        for mod_name, attr, owner, names, values, method_names in self.classes:
            now = getattr(sys.modules.get(mod_name), attr, None)
            if owner is None or now is not owner:
                return False
            table = vars(now)
            if not all(map(operator.is_, map(table.get, names, repeat(_MISSING)), values)):
                return False
            others = table.keys() - method_names  # plain attributes, or a method added since (shadowing one)
            if any(map(isinstance, map(table.__getitem__, others), repeat(_METHOD_TYPES))):
                return False
        return True


@dataclass
class HarnessSnapshot:
    """What the process looked like before the candidate's code ran."""

    entries: dict[str, Any]
    parts: dict[str, tuple[Any, ...]]
    classes: dict[str, dict[str, Any]]
    tables: dict[str, str]
    saved_tables: dict[str, bytes | None]
    state: dict[str, Any]
    hooks: tuple[Any, Any, list[Any]]
    harness: dict[str, types.ModuleType]
    threads: frozenset[int]
    thread_count: int
    index: _Index | None = field(default=None, repr=False)

    @classmethod
    def take(cls) -> HarnessSnapshot:
        entries: dict[str, Any] = {}
        tables: dict[str, str] = {}
        saved: dict[str, bytes | None] = {}
        classes: dict[str, dict[str, Any]] = {}
        harness = dict(_harness_modules())
        for mod_name in WATCHED_MODULES:
            module = sys.modules.get(mod_name)
            for attr, value in vars(module).items() if module is not None else ():
                if _watched(value):
                    entries[f"{mod_name}.{attr}"] = value
        for mod_name, module in harness.items():
            for attr, value in vars(module).items():
                if attr.startswith("__"):
                    continue
                entries[f"{mod_name}.{attr}"] = value
                if isinstance(value, (dict, list, tuple, frozenset, set)):
                    tables[f"{mod_name}.{attr}"] = repr(value)
                    if isinstance(value, (dict, list, set)):
                        saved[f"{mod_name}.{attr}"] = _frozen_copy(value)
                if isinstance(value, type) and value.__module__ == mod_name:
                    classes[f"{mod_name}.{attr}"] = _class_methods(value)
        for mod_name, attr in WATCHED_CLASSES:
            owner = sys.modules.get(mod_name)
            if owner is not None and isinstance(getattr(owner, attr, None), type):
                classes[f"{mod_name}.{attr}"] = _class_methods(getattr(owner, attr))
        parts = {k: _function_parts(v) for k, v in entries.items() if isinstance(v, types.FunctionType)}
        hooks = (sys.gettrace(), sys.getprofile(), list(gc.callbacks))
        return cls(entries, parts, classes, tables, saved, _state(), hooks, harness, _thread_ids(), _thread._count(),
                   _Index.build(entries, parts, classes))

    def changes(self) -> list[str]:
        """What differs now; empty when nothing was touched."""
        quick = self.index is not None and self.index.intact()
        found = [] if quick else self._entry_changes()
        for key, text in self.tables.items():
            mod_name, _, attr = key.rpartition(".")
            if repr(getattr(sys.modules.get(mod_name), attr, None)) != text:
                found.append(f"table {key} was modified")
        now_state = _state()
        found += [f"{name} changed" for name in self.state if now_state.get(name) != self.state[name]]
        found += [f"sys.modules[{name!r}] was replaced" for name, module in self.harness.items()
                  if sys.modules.get(name) is not module]
        return found

    def _entry_changes(self) -> list[str]:
        """Entries, function bodies and class methods that differ, one line each (the slow, descriptive walk)."""
        found = []
        for key, value in self.entries.items():
            mod_name, _, attr = key.rpartition(".")
            module = sys.modules.get(mod_name)
            now = vars(module).get(attr, _MISSING) if module is not None else _MISSING
            if now is not value:
                found.append(f"{key} was {'removed' if now is _MISSING else 'replaced'}")
            elif key in self.parts and _function_parts(value) != self.parts[key]:
                found.append(f"{key} had its code or defaults replaced")
        for key, attrs in self.classes.items():
            mod_name, _, attr = key.rpartition(".")
            now_cls = getattr(sys.modules.get(mod_name), attr, None)
            now = _class_methods(now_cls) if isinstance(now_cls, type) else {}
            for name in set(attrs) | set(now):
                if attrs.get(name, _MISSING) is not now.get(name, _MISSING):
                    found.append(f"{key}.{name} was changed")
        return found

    def restore(self) -> None:
        """Put back what a candidate changed, for a process that goes on verifying (in-process runs, tests). A
        sandboxed candidate's process is discarded anyway. Threads cannot be undone; they are only reported."""
        for key, value in self.entries.items():
            mod_name, _, attr = key.rpartition(".")
            module = sys.modules.get(mod_name)
            if module is not None and vars(module).get(attr, _MISSING) is not value:
                setattr(module, attr, value)
            if key in self.parts and _function_parts(value) != self.parts[key]:
                value.__code__, value.__defaults__, value.__kwdefaults__ = self.parts[key]
        for key, attrs in self.classes.items():
            mod_name, _, attr = key.rpartition(".")
            cls = getattr(sys.modules.get(mod_name), attr, None)
            if isinstance(cls, type):
                for name, now in _class_methods(cls).items():
                    if attrs.get(name, _MISSING) is not now:
                        delattr(cls, name)
                for name, value in attrs.items():
                    if vars(cls).get(name, _MISSING) is not value:
                        setattr(cls, name, value)
        for key, frozen in self.saved_tables.items():
            mod_name, _, attr = key.rpartition(".")
            table = getattr(sys.modules.get(mod_name), attr, None)
            if frozen is not None and table is not None and repr(table) != self.tables[key]:
                value = pickle.loads(frozen)
                table.clear()
                table.update(value) if isinstance(table, (dict, set)) else table.extend(value)
        self._restore_state()

    def _restore_state(self) -> None:
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode

        trace, profile, callbacks = self.hooks
        if sys.gettrace() is not trace:  # only when changed: a C-level profiler's hook cannot be set back from Python
            sys.settrace(trace)
        if sys.getprofile() is not profile:
            sys.setprofile(profile)
        gc.callbacks[:] = callbacks
        while len(_get_current_function_mode_stack()) > len(self.state["torch function mode stack"]):
            torch._C._pop_torch_function_stack()
        while len(_get_current_dispatch_mode_stack()) > len(self.state["torch dispatch mode stack"]):
            _pop_mode()
        torch.set_default_dtype(self.state["torch default dtype"])
        torch.set_grad_enabled(self.state["torch grad mode"])
        for name, module in self.harness.items():
            sys.modules[name] = module

    def new_threads(self) -> list[str]:
        """Threads alive now that were not before: work that outlives the call that started it."""
        alive = [t for t in threading.enumerate() if t.ident not in self.threads]
        extra = _thread._count() - self.thread_count
        names = [t.name for t in alive]
        if extra > len(names):
            names += [f"{extra - len(names)} raw thread(s)"]
        return names

    def verify(self) -> None:
        """Raise `tampering` if anything differs or a thread outlived the candidate's call."""
        changed = self.changes()
        if changed:
            raise CandidateFailure(Verdict.TAMPERING, "the candidate altered the harness: " + "; ".join(changed[:5]),
                                   detail="\n".join(changed[:200]))
        threads = self.new_threads()
        if threads:
            raise CandidateFailure(Verdict.TAMPERING, "threads still running after the call returned (deferred "
                                   f"work): {', '.join(threads[:5])}")


class _Missing:
    pass


_MISSING = _Missing()


def _frozen_copy(value: Any) -> bytes | None:
    """A deep copy as bytes: nested tables restore level by level, and bytes are invisible to gc.get_objects(), so a
    candidate rewriting every matching table it finds through gc cannot rewrite this copy as well."""
    try:
        return pickle.dumps(value)
    except Exception:  # an entry that cannot be pickled is compared, not restored
        return None


def _thread_ids() -> frozenset[int]:
    return frozenset(t.ident for t in threading.enumerate() if t.ident is not None)


def _state() -> dict[str, Any]:
    """Process-wide state a candidate could use to intercept the checker (identities, so repr cannot lie)."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return {
        "torch function mode stack": tuple(map(id, _get_current_function_mode_stack())),
        "torch dispatch mode stack": tuple(map(id, _get_current_dispatch_mode_stack())),
        "sys trace hook": id(sys.gettrace()),
        "sys profile hook": id(sys.getprofile()),
        "gc callbacks": tuple(map(id, gc.callbacks)),
        "torch default dtype": torch.get_default_dtype(),
        "torch grad mode": torch.is_grad_enabled(),
    }
