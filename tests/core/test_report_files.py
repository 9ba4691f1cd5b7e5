"""The CLI's report files on a real filesystem: refused before a run when they cannot be written, written whole
(through a rename) after it, and saved elsewhere, not lost, when the write fails at the end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelproof_core.cli.report_files import check_writable, write_atomically
from kernelproof_core.errors import UsageError


def test_a_path_that_cannot_be_written_is_refused_up_front(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file, not a directory")
    with pytest.raises(UsageError, match=r"cannot write the report to .*file\.txt/r\.json"):
        check_writable(tmp_path / "ok" / "r.json", blocker / "r.json")
    with pytest.raises(UsageError, match="it is a directory"):
        check_writable(tmp_path)
    check_writable(None, tmp_path / "new" / "deeper" / "r.md")  # directories are made; nothing is left behind
    assert list((tmp_path / "new" / "deeper").iterdir()) == []


def test_the_report_is_replaced_whole_with_the_umask_mode(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    assert write_atomically(target, '{"new": true}') == target
    assert target.read_text() == '{"new": true}' and [p.name for p in tmp_path.iterdir()] == ["r.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_write_that_fails_at_the_end_saves_the_report_elsewhere(tmp_path: Path) -> None:
    blocker = tmp_path / "gone"
    blocker.write_text("the directory was replaced by a file during the run")
    saved = write_atomically(blocker / "r.json", "the whole report")
    try:
        assert saved != blocker / "r.json" and saved.suffix == ".json" and saved.read_text() == "the whole report"
    finally:
        saved.unlink()
