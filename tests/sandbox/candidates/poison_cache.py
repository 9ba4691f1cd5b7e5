# mypy: ignore-errors
# Leaves poison in every place it may write (its own scratch, HOME, Triton cache) and a daemonised process behind,
# then passes: `leftover_check` (run next) must find none of it.
import os
import time
from pathlib import Path

for _d in (Path(os.environ["HOME"]), Path(os.environ["TRITON_CACHE_DIR"]), Path(os.environ["TMPDIR"])):
    (_d / "POISON").write_text("poison")
    (_d / "ab" / "cd").mkdir(parents=True, exist_ok=True)
    (_d / "ab" / "cd" / "POISON.so").write_text("poison")
if os.fork() == 0:  # a daemon that outlives the candidate (for 30 s at most)
    os.setsid()
    if os.fork() == 0:
        time.sleep(30)
    os._exit(0)
