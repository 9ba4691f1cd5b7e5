"""Carrying Triton cache entries between processes (kernelproof_core/sandbox/triton_cache.py): group indexes are
moved to the new cache, nothing lands outside it, the size cap drops whole entries, and a child never lets carried
entries replace one it already has."""

from __future__ import annotations

import json
from pathlib import Path

from kernelproof_core.sandbox.child import _fresh_entries
from kernelproof_core.sandbox.triton_cache import install_entries, read_entries


def _entry(cache: Path, key: str, size: int) -> None:
    (cache / key).mkdir(parents=True)
    (cache / key / "k.cubin").write_bytes(b"\x7fELF" + b"x" * size)
    (cache / key / "k.json").write_text("{}")
    group = {"child_paths": {"k.cubin": str(cache / key / "k.cubin"), "k.json": str(cache / key / "k.json")}}
    (cache / key / "__grp__k.json").write_text(json.dumps(group))


def test_installed_group_indexes_point_into_the_new_cache(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    _entry(old, "AAAA", 10)
    files, dropped = read_entries(old)
    assert dropped == 0 and set(files) == {"AAAA/k.cubin", "AAAA/k.json", "AAAA/__grp__k.json"}
    assert install_entries(new, files) == 3
    group = json.loads((new / "AAAA" / "__grp__k.json").read_text())
    assert group["child_paths"] == {"k.cubin": str(new / "AAAA" / "k.cubin"), "k.json": str(new / "AAAA" / "k.json")}
    assert all(Path(p).exists() for p in group["child_paths"].values())


def test_paths_outside_the_cache_are_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    hostile = {"../escape": b"x", "a/../../escape2": b"x", "/abs/x": b"x", "deep/er/file": b"x", "flat": b"x",
               "KEY/__grp__k.json": json.dumps({"child_paths": {"a": "/etc/passwd", "b": "/x/../..",
                                                                "c": "/tmp/../KEY/ok"}}).encode()}
    assert install_entries(cache, hostile) == 1  # only the group index: the others are not <key>/<file>
    assert not (tmp_path / "escape").exists() and not (tmp_path / "escape2").exists()
    assert sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file()) == ["KEY/__grp__k.json"]
    paths = json.loads((cache / "KEY" / "__grp__k.json").read_text())["child_paths"]
    # Moved under the cache (its last two parts); a path ending in a dot-dot part is dropped.
    assert paths == {"a": str(cache / "etc" / "passwd"), "c": str(cache / "KEY" / "ok")}


def test_the_size_cap_drops_whole_entries_smallest_first_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _entry(cache, "SMALL", 100)
    _entry(cache, "LARGE", 5000)
    small = sum(len(b) for rel, b in read_entries(cache)[0].items() if rel.startswith("SMALL/"))
    files, dropped = read_entries(cache, max_bytes=small + 10)
    assert dropped == 1 and {rel.split("/")[0] for rel in files} == {"SMALL"}
    files, dropped = read_entries(cache, max_bytes=0)
    assert dropped == 2 and files == {}


def test_a_child_keeps_its_own_entries_over_carried_ones(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _entry(cache, "HARNESS", 10)
    carried = {"HARNESS/k.cubin": b"poison", "CAND/k.cubin": b"\x7fELF"}
    assert _fresh_entries(cache, carried) == {"CAND/k.cubin": b"\x7fELF"}
