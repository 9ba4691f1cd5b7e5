"""Smoke run of the embedded service on a real machine (the H200 evidence): `kernelproof serve`, then
`kernelproof submit --wait` of the built-in rms_norm candidate, then the stored report.

    python -m tests.service.serve_smoke OUT_DIR [--device cuda] [--no-sandbox] [--campaign quick]

Writes OUT_DIR/serve_report.json (the report the service stored), serve_report.md, serve_submission.json and
serve.log. Exits non-zero unless the verdict is `pass` and, on CUDA, every case carries CUDA-event timings.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "kernelproof_core"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "interpreter"])
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--campaign", default="quick")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="kernelproof-serve-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELPROOF_")}
    env["KERNELPROOF_DATA_DIR"] = str(data_dir)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    serve_cmd = [*CLI, "serve", "--port", str(port), "--device", args.device]
    if args.no_sandbox:
        serve_cmd.append("--no-sandbox")
    log_path = args.out / "serve.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(serve_cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                sys.stderr.write(log_path.read_text()[-4000:])
                return 1
            time.sleep(0.5)
        key = next(ln.strip() for ln in log_path.read_text().splitlines() if ln.strip().startswith("kp_"))
        candidate = REPO / "kernelproof_core" / "kernels" / "rms_norm.py"
        submit = subprocess.run(
            [
                *CLI,
                "submit",
                str(candidate),
                "--task",
                "rms_norm",
                "--campaign",
                args.campaign,
                "--wait",
                "--url",
                url,
                "--api-key",
                key,
                "--json",
                "--meta",
                "generator=serve-smoke",
                "--timeout",
                "3000",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        sys.stdout.write(submit.stdout[-4000:] + submit.stderr[-4000:])
        submission = json.loads(submit.stdout)
        (args.out / "serve_submission.json").write_text(json.dumps(submission, indent=2))
        headers = {"Authorization": f"Bearer {key}"}
        report = httpx.get(f"{url}/v1/submissions/{submission['id']}/report", headers=headers, timeout=60).json()
        (args.out / "serve_report.json").write_text(json.dumps(report, indent=2))
        markdown = httpx.get(f"{url}/v1/submissions/{submission['id']}/report.md", headers=headers, timeout=60)
        (args.out / "serve_report.md").write_text(markdown.text)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    timed = [c.get("timing") or {} for c in report["cases"]]
    cuda_ok = report["config"]["device"] != "cuda" or all(t.get("kind") == "cuda_events" for t in timed)
    ok = submit.returncode == 0 and report["summary"]["verdict"] == "pass" and cuda_ok
    sys.stdout.write(
        f"serve smoke: verdict {report['summary']['verdict']}, device {report['config']['device']}, "
        f"reward {report['summary']['reward']}, {'OK' if ok else 'FAILED'}\n"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
