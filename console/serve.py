"""`python -m console.serve`: the console as the product runs it — gunicorn managing several uvicorn worker
processes, one per core by default (docs/scaling.md). scripts/run (through the Procfile), compose.yaml, the
load benchmark and the browser tests all start the console with this one command.

    python -m console.serve [--bind 127.0.0.1:8000] [--workers N]

Workers: --workers, else ARK_WEB_WORKERS, else the number of cores. Every worker serves HTTP and websockets;
events reach sockets on any worker through the Channels layer on Redis, and a killed worker is replaced by
gunicorn while its clients reconnect to the others.
"""

from __future__ import annotations

import argparse
import os
import sys

from uvicorn_worker import UvicornWorker


class Worker(UvicornWorker):
    """Channels' router answers only http and websocket scopes: no ASGI lifespan protocol."""

    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "lifespan": "off"}


def default_workers() -> int:
    return int(os.environ.get("ARK_WEB_WORKERS") or os.cpu_count() or 1)


def pool_size_for(max_connections: int, workers: int, reserved: int = 10, other_processes: int = 2) -> int:
    """Connections per web process: the server's limit less what it reserves (superuser slots, psql, the
    migrations), shared by the web workers and the loop worker and its beat (other_processes); at least 2,
    at most 16 (a worker runs at most a few dozen sync views at once)."""
    return max(2, min(16, (max_connections - reserved) // (workers + other_processes)))


def size_database_pool(workers: int) -> None:
    """On PostgreSQL, unless ARK_DB_POOL_MAX is set, size each process's pool from the server's limit."""
    url = os.environ.get("DATABASE_URL", "")
    if os.environ.get("ARK_DB_POOL_MAX") or not url.startswith(("postgres://", "postgresql://")):
        return
    import psycopg  # local: only a PostgreSQL deployment needs it here

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            limit = int(conn.execute("SHOW max_connections").fetchone()[0])
    except psycopg.Error as exc:
        print(f"[ark] could not read max_connections ({exc}); pool size stays at its default", file=sys.stderr)
        return
    os.environ["ARK_DB_POOL_MAX"] = str(pool_size_for(limit, workers))
    print(f"[ark] PostgreSQL allows {limit} connections: {workers} web workers, "
          f"{os.environ['ARK_DB_POOL_MAX']} pooled connections each", file=sys.stderr)


def gunicorn_argv(bind: str, workers: int) -> list[str]:
    return [sys.executable, "-m", "gunicorn", "console.asgi:application",
            "--worker-class", "console.serve.Worker", "--workers", str(workers), "--bind", bind,
            # a websocket stays open for hours: no request timeout kills a worker that holds one
            "--timeout", "0", "--graceful-timeout", "10", "--keep-alive", "5",
            "--no-control-socket",  # several consoles on one host (tests, benchmarks) must not share one
            # No access log unless asked for: with any log file, even /dev/null, each uvicorn worker formats a line
            # per request (it logs only when gunicorn gave its access logger a handler).
            *(["--access-logfile", "-"] if os.environ.get("ARK_ACCESS_LOG") else [])]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m console.serve", description=__doc__.split("\n")[0])
    parser.add_argument("--bind", default=f"127.0.0.1:{os.environ.get('PORT', '8000')}")
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    size_database_pool(args.workers)
    argv_ = gunicorn_argv(args.bind, args.workers)
    os.execv(argv_[0], argv_)


if __name__ == "__main__":
    main()
