# mypy: ignore-errors
# Forks up to 300 sleeping children (each exits after 30 s) while the module loads; the pids limit is far lower.
import os
import time

for _ in range(300):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
