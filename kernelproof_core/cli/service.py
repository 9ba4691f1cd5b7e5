"""Service subcommands: `serve` (the embedded default), `worker` (one Celery worker per GPU), `submit`, `keys`
and `migrate`. Everything service-side is imported inside the handlers, so `kernelproof list/run/verify` never
import FastAPI, SQLAlchemy or Celery."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelproof_core.cli.exit_codes import ExitCode, exit_code_for

if TYPE_CHECKING:  # annotations only: SQLAlchemy is imported inside the handlers
    from sqlalchemy.orm import Session


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="the whole service in one process: API + SQLite + in-process worker")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--database-url", help="default: SQLite file under the data directory")
    p.add_argument(
        "--device",
        choices=["auto", "cuda", "interpreter"],
        default=None,
        help="device campaigns run on (default: cuda if available, else the Triton interpreter)",
    )
    p.add_argument("--no-sandbox", action="store_true", help="verify in-process (trusted local debugging only)")
    p.add_argument("--no-auth", action="store_true", help="accept requests without an API key")
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser("worker", help="a Celery GPU worker (run one per GPU)")
    p.add_argument(
        "--gpu", type=int, help="pin this GPU on a bare host (CUDA_VISIBLE_DEVICES and the sandbox's device node)"
    )
    p.add_argument("--gpu-class", help="GPU class served, e.g. h200 (consumes <prefix>.<class> and <prefix>.any)")
    p.add_argument("--no-sweeper", action="store_true", help="do not run the sweeper thread in this worker")
    p.add_argument("--loglevel", default="INFO")
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser("submit", help="submit a candidate file to a KernelProof service")
    p.add_argument("file", type=Path)
    p.add_argument("--task", required=True)
    p.add_argument("--dtype", action="append", dest="dtypes", help="repeatable; default: the preset's choice")
    p.add_argument("--campaign", default="quick", help="preset: quick | standard | full (default: quick)")
    p.add_argument("--case", action="append", dest="case_ids", help="only this case id (repeatable)")
    p.add_argument("--samples", type=int, help="timing samples (within the operator's limits)")
    p.add_argument("--no-measure", action="store_true", help="correctness gates only")
    p.add_argument("--gpu-class")
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata (generator, model, run_id, or anything); repeatable",
    )
    p.add_argument("--tag", action="append", default=[], help="metadata tag (repeatable)")
    p.add_argument("--wait", action="store_true", help="wait for the verdict and exit with its exit code")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait with --wait")
    p.add_argument("--url", help="service URL (default: KERNELPROOF_CLIENT_URL or http://127.0.0.1:8000)")
    p.add_argument("--api-key", help="API key (default: KERNELPROOF_CLIENT_API_KEY)")
    p.add_argument("--json", action="store_true", help="print the submission as JSON")
    p.set_defaults(handler=cmd_submit)

    p = sub.add_parser("keys", help="manage API keys (stored hashed)")
    keys_sub = p.add_subparsers(dest="keys_command", required=True)
    k = keys_sub.add_parser("create", help="create a key and print it (once)")
    k.add_argument("--name", default="default")
    k.add_argument("--rate-limit", type=int, help="requests per minute (default: the service setting)")
    k.add_argument("--database-url")
    k.set_defaults(handler=cmd_keys_create)
    k = keys_sub.add_parser("list", help="list keys (prefixes only)")
    k.add_argument("--database-url")
    k.set_defaults(handler=cmd_keys_list)
    k = keys_sub.add_parser("revoke", help="revoke the key(s) with this prefix")
    k.add_argument("prefix")
    k.add_argument("--database-url")
    k.set_defaults(handler=cmd_keys_revoke)

    p = sub.add_parser("migrate", help="create or upgrade the database schema (alembic upgrade)")
    p.add_argument("--database-url")
    p.add_argument("--revision", default="head")
    p.set_defaults(handler=cmd_migrate)


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(f"kernelproof: {text}\n")


def _settings(database_url: str | None, **updates: Any) -> Any:
    from kernelproof_core.settings import get_settings

    if database_url:
        updates["database_url"] = database_url
    return get_settings().model_copy(update=updates)


def cmd_serve(args: argparse.Namespace) -> int:
    if args.no_sandbox:  # the embedded worker verifies in this process: pick Triton's mode before it is imported
        from kernelproof_core.interpreter import interpret_if_asked
        from kernelproof_core.settings import get_settings

        interpret_if_asked(args.device or get_settings().service_device)
    import uvicorn

    from api.app import create_app
    from kernelproof_core.store import keys
    from kernelproof_core.store.migrate import upgrade
    from kernelproof_core.store.session import UNAVAILABLE_ERRORS, database_url, session_factory_for

    updates: dict[str, Any] = {"queue_backend": "embedded"}
    if args.device:
        updates["service_device"] = args.device
    if args.no_sandbox:
        updates["sandbox_enabled"] = False
    if args.no_auth:
        updates["api_auth_required"] = False
    settings = _settings(args.database_url, **updates)
    url = database_url(settings)
    try:
        upgrade(url)
        if settings.api_auth_required:
            sessions = session_factory_for(settings)
            with sessions() as session:
                if keys.count_active(session) == 0:
                    new = keys.create_key(session, "serve-bootstrap")
                    _out(f"No API keys yet; created one (shown once, stored hashed):\n  {new.plaintext}")
                    _out(f"Use it with: export KERNELPROOF_CLIENT_API_KEY={new.plaintext}")
    except UNAVAILABLE_ERRORS as exc:
        return _database_fault(url, exc)
    _out(
        f"KernelProof embedded service on http://{args.host}:{args.port} (database {url.split('://')[0]}, "
        f"sandbox {'on' if settings.sandbox_enabled else 'OFF'})"
    )
    sys.stdout.flush()
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level="info")
    return ExitCode.OK


def cmd_worker(args: argparse.Namespace) -> int:
    # Environment first: the Celery app and every job process read their settings (and the GPU) from it.
    if args.gpu is not None:
        # On a bare host the CUDA index and the /dev/nvidiaN node the sandbox binds are the same number. In a
        # container the runtime already exposes only the reserved GPU: leave --gpu out and set
        # KERNELPROOF_SANDBOX_GPU_INDEX to its device node instead.
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
        os.environ["KERNELPROOF_SANDBOX_GPU_INDEX"] = str(args.gpu)
    if args.gpu_class:
        os.environ["KERNELPROOF_WORKER_GPU_CLASS"] = args.gpu_class
    if args.no_sweeper:
        os.environ["KERNELPROOF_SWEEPER_ENABLED"] = "false"
    from kernelproof_core.settings import get_settings

    get_settings.cache_clear()
    from worker.celery_app import app
    from worker.dispatch import queue_name

    settings = get_settings()
    queues = [queue_name(settings, None)]
    if settings.worker_gpu_class:
        queues.insert(0, queue_name(settings, settings.worker_gpu_class))
    node = f"kernelproof-gpu{args.gpu if args.gpu is not None else settings.sandbox_gpu_index}@%h"
    app.worker_main(
        [
            "worker",
            "--pool=solo" if settings.worker_overlap == 1 else "--pool=threads",
            f"--concurrency={settings.worker_overlap}",
            "--without-gossip",
            "--without-mingle",
            "-Q",
            ",".join(queues),
            "-n",
            node,
            "--loglevel",
            args.loglevel,
        ]
    )
    return ExitCode.OK


def cmd_submit(args: argparse.Namespace) -> int:
    from kernelproof_core.client import APIError, Client
    from kernelproof_core.verdicts import Verdict

    path: Path = args.file
    if not path.is_file():
        _err(f"candidate file not found: {path}")
        return ExitCode.USAGE
    metadata: dict[str, Any] = {}
    for item in args.meta:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _err(f"--meta expects KEY=VALUE, got {item!r}")
            return ExitCode.USAGE
        metadata[key] = value
    if args.tag:
        metadata["tags"] = args.tag
    campaign: str | dict[str, Any] = args.campaign
    overrides = {
        "case_ids": args.case_ids,
        "samples": args.samples,
        "measure": False if args.no_measure else None,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if overrides:
        campaign = {"preset": args.campaign, **overrides}
    try:
        with Client(args.url, args.api_key, timeout=60.0) as client:
            sub = client.submit(
                args.task,
                path.read_bytes(),
                dtypes=args.dtypes,
                campaign=campaign,
                gpu_class=args.gpu_class,
                metadata=metadata or None,
            )
            if args.wait and sub["state"] not in ("finished", "error"):
                sub = client.wait(sub["id"], timeout=args.timeout)
    except APIError as exc:
        _err(f"the service refused the request: {exc} ({exc.type})")
        return ExitCode.USAGE if 400 <= exc.status < 500 and exc.status != 429 else ExitCode.INFRA
    except TimeoutError as exc:
        _err(str(exc))
        return ExitCode.INFRA
    except Exception as exc:  # connection refused, DNS, TLS: the service is not reachable
        _err(f"could not reach the service: {type(exc).__name__}: {exc}")
        return ExitCode.INFRA
    if args.json:
        _out(json.dumps(sub, indent=2))
    if sub["state"] not in ("finished", "error"):
        if not args.json:
            _out(f"submitted {sub['id']} ({sub['state']}): {sub['url']}")
        return ExitCode.OK
    if not args.json:
        reward = "n/a" if sub["reward"] is None else f"{sub['reward']:+.4f}"
        summary = sub.get("summary") or {}
        cases = f"{summary.get('cases_passed', '?')}/{summary.get('cases_total', '?')}" if summary else "?"
        reused = f" (reused from {sub['reused_from']})" if sub.get("reused") else ""
        _out(f"verdict: {sub['verdict']}  cases: {cases} passed  reward: {reward}  submission: {sub['id']}")
        if reused:
            _out(reused.strip())
        failure = summary.get("first_failure") if summary else None
        if failure:
            _out(f"first failure: {failure.get('code')}: {failure.get('message')}")
        if sub.get("error"):
            _out(f"error: {sub['error']}")
    if sub["state"] == "error" or sub["verdict"] is None:
        return ExitCode.INFRA
    return exit_code_for(Verdict(sub["verdict"]))


def _on_key_store(args: argparse.Namespace, action: Callable[[Session], int]) -> int:
    """Run a `keys` action in a session on the service's database, whose schema must be current. The embedded
    SQLite is migrated here as `serve` does, so keys can be made before the first start; an external database is
    the operator's to migrate (`kernelproof migrate`). Unreachable: exit 4 with the reason, not a traceback."""
    from kernelproof_core.store.migrate import at_head, upgrade
    from kernelproof_core.store.session import UNAVAILABLE_ERRORS, database_url, session_factory_for

    settings = _settings(args.database_url)
    url = database_url(settings)
    try:
        if not settings.database_url.strip():
            upgrade(url)
        elif not at_head(url):
            sys.stderr.write(f"kernelproof: the database ({url.split('://')[0]}) is not at the current schema; "
                             "run `kernelproof migrate` first\n")
            return ExitCode.USAGE
        with session_factory_for(settings)() as session:
            return action(session)
    except UNAVAILABLE_ERRORS as exc:
        return _database_fault(url, exc)


def _database_fault(url: str, exc: Exception) -> int:
    """A database the command cannot reach: the reason on stderr and exit 4, not a traceback."""
    from kernelproof_core.store.session import unavailable_reason

    sys.stderr.write(f"kernelproof: cannot use the database ({url.split('://')[0]}): {unavailable_reason(exc)}\n")
    return ExitCode.INFRA


def cmd_keys_create(args: argparse.Namespace) -> int:
    from kernelproof_core.store import keys

    def create(session: Session) -> int:
        new = keys.create_key(session, args.name, args.rate_limit)
        _out(new.plaintext)
        sys.stderr.write(f"created key #{new.id} {new.prefix}… ({new.name}); it is shown only this once\n")
        return ExitCode.OK

    return _on_key_store(args, create)


def cmd_keys_list(args: argparse.Namespace) -> int:
    from kernelproof_core.store import keys

    def show(session: Session) -> int:
        for row in keys.list_keys(session):
            status = "revoked" if row.revoked_at else "active"
            limit = row.rate_limit_per_minute or "default"
            _out(f"#{row.id}\t{row.prefix}…\t{status}\t{limit}/min\t{row.name}\t{row.created_at:%Y-%m-%d}")
        return ExitCode.OK

    return _on_key_store(args, show)


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from kernelproof_core.store import keys

    def revoke(session: Session) -> int:
        n = keys.revoke_key(session, args.prefix)
        _out(f"revoked {n} key(s)")
        if not n:
            sys.stderr.write(f"kernelproof: no active key has the prefix {args.prefix!r} (`kernelproof keys list`)\n")
        return ExitCode.OK if n else ExitCode.USAGE

    return _on_key_store(args, revoke)


def cmd_migrate(args: argparse.Namespace) -> int:
    from kernelproof_core.store.migrate import upgrade
    from kernelproof_core.store.session import UNAVAILABLE_ERRORS, database_url

    url = database_url(_settings(args.database_url))
    try:
        upgrade(url, args.revision)
    except UNAVAILABLE_ERRORS as exc:
        return _database_fault(url, exc)
    _out(f"database at revision {args.revision} ({url.split('://')[0]})")
    return ExitCode.OK
