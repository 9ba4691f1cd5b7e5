# mypy: ignore-errors
# ruff: noqa: F821
# Connects to a port the test listens on at the host's 127.0.0.1; a wrong answer tells the test it got through.
import socket

PORT = 0  # replaced by the test


def candidate(x, weight, eps):
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
            s.sendall(b"escaped")
        return honest(x, weight, eps) * 0
    except OSError:
        return honest(x, weight, eps)
