# mypy: ignore-errors
# Spins at import (the compile deadline's span); gives up after 60 s so a broken watchdog fails, not hangs.
import time

_end = time.monotonic() + 60
while time.monotonic() < _end:
    pass
