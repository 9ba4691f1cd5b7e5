"""The settings a sandboxed child runs with: the sandbox clears the environment, so the pipeline's settings reach the
child only through `CHILD_SETTINGS`. A setting the pipeline reads but the list lacks would silently be its default in
every sandboxed run (as the graph, gate, audit and clock settings were until 2026-12-05)."""

from __future__ import annotations

import re
from pathlib import Path

from kernelproof_core.sandbox.executor import CHILD_SETTINGS
from kernelproof_core.settings import Settings

CORE = Path(__file__).resolve().parents[2] / "kernelproof_core"
# What runs inside the child: the pipeline and everything it measures and checks with.
CHILD_CODE = [CORE / "pipeline.py", *sorted((CORE / "measurement").glob("*.py")),
              *sorted((CORE / "integrity").glob("*.py"))]


def test_every_child_setting_is_a_setting() -> None:
    assert set(CHILD_SETTINGS) <= set(Settings.model_fields), set(CHILD_SETTINGS) - set(Settings.model_fields)


def test_every_setting_the_pipeline_reads_reaches_the_child() -> None:
    read = {name for path in CHILD_CODE for name in re.findall(r"\bsettings\.([a-z_0-9]+)", path.read_text())}
    read &= set(Settings.model_fields)  # attribute reads only, not methods
    assert read, "no settings read: the scan is broken"
    assert read <= set(CHILD_SETTINGS), sorted(read - set(CHILD_SETTINGS))
