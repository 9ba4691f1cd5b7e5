"""Hostile candidates for the sandbox tests. Each file is appended to `_honest.py` (which defines `honest`, a
correct rms_norm Triton candidate) and is self-limiting, so a broken watchdog fails a test instead of hanging CI."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def source(name: str, **replace: str) -> bytes:
    """`_honest.py` + `<name>.py`, with `KEY = 0` placeholders replaced (KEY=value)."""
    text = (HERE / "_honest.py").read_text() + "\n\n" + (HERE / f"{name}.py").read_text()
    for key, value in replace.items():
        placeholder = f"{key} = 0  # replaced by the test"
        assert placeholder in text, placeholder
        text = text.replace(placeholder, f"{key} = {value}")
    return text.encode()
