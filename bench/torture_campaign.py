"""A long torture campaign against one backend on a server the test harness starts.

    python -m bench.torture_campaign redis --duration 600 --max-ops 1000000

Starts the server (``tests/servers``), runs ``ledger_conformance.torture`` through the
fault proxy with kill -9 restarts where the harness owns the server (and the forget check
where there is a forget hook), prints progress on stderr and the summary on stdout. The
figures in docs/reliability.md's torture table come from this script.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger_conformance.torture import Campaign, run
from tests.servers import dynamodb, mongodb, postgres
from tests.servers import redis as redis_servers

TIMEOUT = 2
Hook = Callable[[], object]


Source = dict[str, str]  # {"url": ...} or {"factory": ...}


@contextmanager
def target(backend: str) -> Iterator[tuple[Source, Hook | None, Hook | None]]:
    """(campaign source: url or factory, restart hook, forget hook) for ``backend``."""
    if backend == "sqlite":
        root = Path(__file__).resolve().parents[1] / ".pytest-tmp"  # a disk, not tmpfs
        root.mkdir(exist_ok=True)
        directory = tempfile.mkdtemp(prefix="torture-sqlite-", dir=root)
        try:
            yield {"url": f"sqlite:///{directory}/ledger.db"}, None, None
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    elif backend == "redis":
        with redis_servers.local_redis(redis_servers.DURABLE) as server:
            import redis

            def forget() -> None:
                client = redis.Redis(port=server.port)
                try:
                    client.flushall()
                finally:
                    client.close()

            url = f"{server.url}?timeout={TIMEOUT}&connect_timeout={TIMEOUT}"
            yield {"url": url}, server.restart, forget
    elif backend == "postgres":
        with postgres.postgres_server() as pg:
            restart = (lambda: pg.restart("immediate")) if pg.can_restart else None
            yield {"url": f"{pg.url}?timeout={TIMEOUT}"}, restart, None
    elif backend == "mongodb":
        with mongodb.mongodb() as found:
            query = "&".join(
                f"{k}={v}" for k, v in {"timeout": TIMEOUT, **found.proof_options}.items()
            )
            url = f"{found.url}{'&' if '?' in found.url else '?'}{query}"
            yield {"url": url}, (found.server.restart if found.server else None), None
    elif backend == "dynamodb":
        from tests.dynamodb import tools
        from tests.torture import factories

        with dynamodb.dynamodb_target("ledger-torture") as dyn:
            os.environ[factories.DYNAMODB_ENV] = dyn.url
            os.environ[factories.NAMESPACE_ENV] = f"torture-{os.urandom(4).hex()}"
            restart = dyn.server.restart if dyn.server is not None else None
            try:
                yield (
                    {"factory": "tests.torture.factories:dynamodb"},
                    restart,
                    lambda: tools.forget(dyn.url),
                )
            finally:
                _keep_log(dyn.server.directory if dyn.server else None, "dynalite")
    else:
        raise SystemExit(f"unknown backend {backend!r}")


def _keep_log(directory: str | None, name: str) -> None:
    """The server's log survives the harness's cleanup (a failed restart is read there)."""
    if directory is not None and os.path.exists(os.path.join(directory, "server.log")):
        keep = Path(tempfile.gettempdir()) / f"torture-{name}-server.log"
        shutil.copyfile(os.path.join(directory, "server.log"), keep)
        print(f"server log: {keep}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=["sqlite", "redis", "postgres", "mongodb", "dynamodb"])
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--max-ops", type=int, default=1_000_000)
    parser.add_argument("--restarts", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()
    with target(args.backend) as (source, restart, forget):
        campaign = Campaign(
            url=source.get("url"),
            factory=source.get("factory"),
            duration=args.duration,
            max_ops=args.max_ops,
            processes=args.processes,
            threads=args.threads,
            tasks=args.tasks,
            restart=restart,
            restarts=args.restarts,
            forget=forget,
            report=args.report,
            progress_every=30.0,
        )
        return run(campaign, err=sys.stderr, out=sys.stdout).code


if __name__ == "__main__":
    sys.exit(main())
