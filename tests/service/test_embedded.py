"""The embedded default end to end: `kernelproof serve` (SQLite + in-process worker, no Postgres, no Redis) and
`kernelproof submit --wait`, whose exit code is the verification exit code."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kernelproof_core.cli.exit_codes import ExitCode
from tests.service.candidates import GOOD, NO_WEIGHT
from tests.service.conftest import REPO, free_port

CLI = [sys.executable, "-m", "kernelproof_core"]


def clean_env(data_dir: Path) -> dict[str, str]:
    """The test process's environment without KernelProof settings and without TRITON_INTERPRET (as a user's shell
    has it: `serve --device interpreter` must pick Triton's mode itself, in-process or sandboxed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELPROOF_") and k != "TRITON_INTERPRET"}
    return {**env, "KERNELPROOF_DATA_DIR": str(data_dir), "KERNELPROOF_SWEEPER_INTERVAL_S": "2"}


@pytest.fixture
def embedded(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, str, Path, dict[str, str]]]:
    """`kernelproof serve` without the sandbox; indirect parametrisation `{"overlap": N}` serves with the sandbox
    and KERNELPROOF_WORKER_OVERLAP=N instead."""
    overlap = getattr(request, "param", {}).get("overlap", 1)
    port = free_port()
    env = clean_env(tmp_path / "data")
    sandbox_flags = ["--no-sandbox"]
    if overlap > 1:
        env["KERNELPROOF_WORKER_OVERLAP"] = str(overlap)
        sandbox_flags = []
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CLI, "serve", "--port", str(port), "--device", "interpreter", *sandbox_flags],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.3)
    key = next(line.strip() for line in log.read_text().splitlines() if line.strip().startswith("kp_"))
    yield url, key, tmp_path / "data" / "kernelproof.sqlite3", env
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(20) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def submit(url: str, key: str, env: dict[str, str], path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "submit",
            str(path),
            "--task",
            "rms_norm",
            "--campaign",
            "quick",
            "--samples",
            "1",
            "--wait",
            "--url",
            url,
            "--api-key",
            key,
            *extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_embedded_service_end_to_end(embedded: tuple[str, str, Path, dict[str, str]], tmp_path: Path) -> None:
    url, key, db_path, env = embedded
    good, bad = tmp_path / "good.py", tmp_path / "no_weight.py"
    good.write_text(GOOD)
    bad.write_text(NO_WEIGHT)

    passed = submit(url, key, env, good, "--case", "n1", "--meta", "generator=laptop", "--tag", "embedded")
    assert passed.returncode == ExitCode.OK, passed.stdout + passed.stderr
    assert passed.stdout.startswith("verdict: pass")
    failed = submit(url, key, env, bad, "--case", "tail127", "--no-measure")
    assert failed.returncode == ExitCode.FAILED, failed.stdout + failed.stderr
    assert "verdict: tolerance" in failed.stdout and "first failure: tolerance" in failed.stdout
    refused = submit(url, "kp_wrong", env, good, "--case", "n1")
    assert refused.returncode == ExitCode.USAGE and "unauthorized" in refused.stderr

    headers = {"Authorization": f"Bearer {key}"}
    listed = httpx.get(f"{url}/v1/submissions", params={"tag": "embedded"}, headers=headers).json()["items"]
    assert len(listed) == 1 and listed[0]["metadata"]["generator"] == "laptop"
    markdown = httpx.get(f"{url}{listed[0]['report_markdown_url']}", headers=headers)
    assert markdown.status_code == 200 and "pass" in markdown.text

    # Same schema, same views, on SQLite.
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT verdict, generator FROM v_submission_rewards ORDER BY created_at").fetchall()
        assert rows == [("pass", "laptop"), ("tolerance", None)]
        assert db.execute("SELECT COUNT(*) FROM v_case_timings WHERE timing_kind IS NOT NULL").fetchone() == (1,)
        assert db.execute("SELECT COUNT(*) FROM api_keys").fetchone() == (1,)


def test_migrate_and_key_commands(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "data")
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args, "--database-url", url], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )

    assert run("migrate").returncode == ExitCode.OK
    created = run("keys", "create", "--name", "fleet-a", "--rate-limit", "120")
    assert created.returncode == ExitCode.OK and created.stdout.startswith("kp_")
    key = created.stdout.strip()
    listed = run("keys", "list")
    assert key[:10] in listed.stdout and "fleet-a" in listed.stdout and "120/min" in listed.stdout
    assert key not in listed.stdout  # only the prefix is ever shown again
    assert run("keys", "revoke", key[:10]).stdout.strip() == "revoked 1 key(s)"
    assert "revoked" in run("keys", "list").stdout
    with sqlite3.connect(tmp_path / "cli.sqlite3") as db:
        stored = db.execute("SELECT key_hash FROM api_keys").fetchone()[0]
    assert key not in stored and len(stored) == 64



def test_key_commands_before_the_first_start_and_on_databases_they_cannot_use(tmp_path: Path) -> None:
    """`keys create` on a fresh embedded data directory migrates it as `serve` would (no traceback on a missing
    table); an explicit database not yet migrated is the operator's (exit 64, says `kernelproof migrate`); an
    unreachable one is exit 4 with the reason, for `keys`, `migrate` and `serve` alike."""
    env = clean_env(tmp_path / "fresh")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)

    created = run("keys", "create", "--name", "first")
    assert created.returncode == ExitCode.OK and created.stdout.startswith("kp_"), created.stderr
    assert "first" in run("keys", "list").stdout
    missing = run("keys", "revoke", "kp_nothing")
    assert missing.returncode == ExitCode.USAGE and "no active key has the prefix 'kp_nothing'" in missing.stderr
    empty = run("keys", "list", "--database-url", f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    assert empty.returncode == ExitCode.USAGE and "run `kernelproof migrate` first" in empty.stderr
    assert "Traceback" not in empty.stderr
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    for command in (("keys", "list"), ("migrate",), ("serve", "--port", str(free_port()))):
        gone = run(*command, "--database-url", nowhere)
        assert gone.returncode == ExitCode.INFRA and "cannot use the database" in gone.stderr, command
        assert "Traceback" not in gone.stderr

@pytest.mark.parametrize("embedded", [{"overlap": 2}], indirect=True)
def test_embedded_service_verifies_submissions_at_once_with_overlap(
        embedded: tuple[str, str, Path, dict[str, str]], tmp_path: Path) -> None:
    """KERNELPROOF_WORKER_OVERLAP=2: two drain loops share the job process, which verifies both submissions at once
    in the sandbox (every timed phase exclusive); both attempts' windows overlap in the attempts table."""
    url, key, db_path, env = embedded
    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    paths[0].write_text(GOOD)
    paths[1].write_text(GOOD + "\n# another source\n")
    procs = [subprocess.Popen([*CLI, "submit", str(p), "--task", "rms_norm", "--campaign", "quick", "--samples", "1",
                               "--case", "n1", "--case", "tail127", "--wait", "--url", url, "--api-key", key],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for p in paths]
    outputs = [proc.communicate(timeout=240)[0] for proc in procs]
    assert all(proc.returncode == ExitCode.OK for proc in procs), outputs
    with sqlite3.connect(db_path) as db:
        windows = db.execute("SELECT started_at, finished_at FROM attempts ORDER BY started_at").fetchall()
        workers = {w for (w,) in db.execute("SELECT worker FROM attempts")}
    assert len(windows) == 2 and len(workers) == 2, (windows, workers)  # two drain loops
    (_, first_end), (second_start, _) = windows
    assert second_start < first_end, windows  # the second started before the first finished
