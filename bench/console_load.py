"""Load on the console: HTTP at a steady rate plus N websocket clients on run pages, while a producer
creates candidates and events through the real services. Everything on loopback.

    python bench/console_load.py            # full form: 50 req/s for 300 s, 200 websocket clients
    python bench/console_load.py --short    # CI form: 10 req/s for 20 s, 20 websocket clients

Stack: the console as the product serves it (python -m console.serve: gunicorn with --web-workers uvicorn
workers, default 1) and a real Celery loop worker as subprocesses, against a scratch database seeded through
the services (SQLite, or --database postgres: a scratch PostgreSQL database, dropped after); Redis from
REDIS_URL (default redis://127.0.0.1:6379/11).

    python bench/console_load.py --database postgres --web-workers 2   # the issue-25 form (docs/scaling.md)
    python bench/console_load.py --database postgres --web-workers 1,2,4   # how it grows: one form per count
    python bench/console_load.py --database postgres --web-workers 2 --fault web,redis,postgres --fault-duration 120
Measures: HTTP error rate and p50/p95/p99 latency; websocket delivery latency from the event's
`created` (set at write, inside the committing transaction) to receipt; events each client missed on
its socket and whether an HTTP re-read (the run's audit CSV) recovered them. Writes
bench/results/console-load.json (or --out).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import datetime as dt
import io
import json
import os
import platform
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _cpu_by_part(stack: Stack) -> dict[str, float]:
    """CPU seconds used so far (user + system) by each part of the stack, from /proc: the web workers (the
    console's process tree), the loop worker, this driver, and PostgreSQL's backends for the benchmark's
    database. Linux only; a part that cannot be read counts 0. Latency on a shared 2-core machine is noisy;
    CPU per answered request is the figure that compares two versions of the server."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, cmdline)

    def tree(root: int) -> float:
        pids = {root}
        for _ in range(4):  # gunicorn master -> workers (-> anything they start)
            pids |= {pid for pid, (ppid, _, _) in stats.items() if ppid in pids}
        return sum(stats[pid][1] for pid in pids if pid in stats)

    console, loop_worker = stack.procs[0].pid, stack.procs[1].pid
    return {"web": tree(console), "loop_worker": tree(loop_worker), "driver": stats.get(os.getpid(), (0, 0.0))[1],
            "postgres": sum(cpu for _, cpu, cmd in stats.values()
                            if stack.pg_name and cmd.startswith("postgres:") and f" {stack.pg_name} " in cmd)}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 2)


# --- a minimal HTTP/1.1 and websocket client on asyncio streams --------------------------------------


async def http_get(port: int, path: str, cookie: str, timeout_s: float = 30.0) -> tuple[int, bytes]:
    async def go():
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nCookie: {cookie}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        await writer.drain()
        data = await reader.read()
        writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if b"transfer-encoding: chunked" in head.lower():
            out, rest = b"", body
            while rest:
                size, _, rest = rest.partition(b"\r\n")
                n = int(size, 16)
                if n == 0:
                    break
                out, rest = out + rest[:n], rest[n + 2 :]
            body = out
        return status, body

    return await asyncio.wait_for(go(), timeout_s)


class WebSocket:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int, path: str, *, cookie: str, origin: str) -> "WebSocket":
        reader, writer = await asyncio.open_connection(HOST, port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        if b" 101 " not in head.split(b"\r\n")[0]:
            writer.close()
            raise ConnectionError(head.split(b"\r\n")[0].decode())
        return cls(reader, writer)

    def _send(self, opcode: int, data: bytes) -> None:
        mask = os.urandom(4)
        header = bytes([0x80 | opcode, 0x80 | len(data)])  # control frames only: < 126 bytes
        self.writer.write(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    async def recv(self) -> str | None:
        """The next text message; None when the server closed."""
        message = b""
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            data = await self.reader.readexactly(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                return None
            if opcode == 0x9:
                self._send(0xA, data)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += data
                if b0 & 0x80:
                    return message.decode()

    async def close(self) -> None:
        try:
            self._send(0x8, struct.pack("!H", 1000))
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            pass
        self.writer.close()


# --- the stack -----------------------------------------------------------------------------------------


PG_ADMIN = os.environ.get("ARK_BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres")
PG_BIN = Path(os.environ.get("ARK_PG_BIN") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), Path("/usr/bin")))


class Stack:
    def __init__(self, scratch: Path, redis_url: str, web_workers: int = 1, database: str = "sqlite",
                 own_postgres: bool = False):
        self.scratch = scratch
        self.web_workers = web_workers
        self.redis_server: subprocess.Popen | None = None
        self.redis_port: int | None = None
        self.pg_name = f"ark_load_{os.getpid()}" if database == "postgres" else None
        self.pg_dir: Path | None = None
        if own_postgres:  # a cluster of the benchmark's own, so that a restart touches no one else's
            global PG_ADMIN
            PG_ADMIN = self.start_own_postgres()
        if self.pg_name:
            import psycopg

            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {self.pg_name}")
        db_url = (PG_ADMIN.rsplit("/", 1)[0] + "/" + self.pg_name if self.pg_name
                  else f"sqlite:///{scratch / 'bench.sqlite3'}")
        self.queue = f"loop.bench{os.getpid()}"
        self.hardware = f"bench{os.getpid()}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        self.env.update(
            {
                "DATABASE_URL": db_url,
                "ARK_VAR_DIR": str(scratch),
                "REDIS_URL": redis_url,
                "ARK_LOOP_QUEUE": self.queue,
                "DJANGO_SETTINGS_MODULE": "console.settings",
                "PYTHONUNBUFFERED": "1",
                "DJANGO_DEBUG": "0",
                "ARK_SERVING_EXPORT_DIR": str(scratch / "serving"),
            }
        )
        self.env.pop("CELERY_BROKER_URL", None)
        self.procs: list[subprocess.Popen] = []
        self.port = _free_port()

    def setup_django(self) -> None:
        os.environ.update(
            {
                k: self.env[k]
                for k in (
                    "DATABASE_URL",
                    "ARK_VAR_DIR",
                    "REDIS_URL",
                    "ARK_LOOP_QUEUE",
                    "DJANGO_SETTINGS_MODULE",
                    "ARK_SERVING_EXPORT_DIR",
                )
            }
        )
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)

    def start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.scratch / f"{name}.log", "wb")
        proc = subprocess.Popen(
            args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def start_servers(self) -> None:
        self.start(
            "console",
            [sys.executable, "-m", "console.serve", "--bind", f"{HOST}:{self.port}", "--workers", str(self.web_workers)],
        )
        self.start(
            "loop-worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "-Q",
                self.queue,
                "--pool=solo",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"bench-{uuid.uuid4().hex[:6]}@%h",
                "--loglevel=WARNING",
            ],
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"http://{HOST}:{self.port}/healthz", timeout=2).status == 200:
                    return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the console did not come up: " + (self.scratch / "console.log").read_text()[-2000:])

    def inject(self, fault: str) -> None:
        """A fault in the middle of the load: `web` kills one web worker (gunicorn starts another), `redis`
        restarts the Redis server that --own-redis started (appendonly: nothing lost), `postgres` restarts the
        benchmark's own PostgreSQL cluster (requests in the gap get 503 with Retry-After)."""
        if fault == "web":
            master = self.procs[0].pid
            kids = sorted(int(c) for t in Path(f"/proc/{master}/task").iterdir()
                          for c in (t / "children").read_text().split())
            os.kill(kids[0], signal.SIGKILL)
        elif fault == "postgres":
            self.pg_ctl("restart", "-m", "fast")
        elif fault == "redis":
            self.redis_server.send_signal(signal.SIGTERM)  # a clean shutdown writes the append-only file
            self.redis_server.wait(30)
            self.redis_server = self.start_redis()
        else:
            raise ValueError(f"unknown fault {fault!r}")

    def pg_ctl(self, *args: str) -> None:
        as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses root
        subprocess.run([*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(self.pg_dir), "-w", "-l", str(self.pg_dir / "log"),
                        "-o", f"-p {self.pg_port} -k {self.pg_dir} -c listen_addresses={HOST}", *args],
                       check=True, capture_output=True, timeout=120)

    def start_own_postgres(self) -> str:
        self.pg_dir, self.pg_port = self.scratch / "pg", _free_port()
        self.pg_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.scratch, "postgres")
            shutil.chown(self.pg_dir, "postgres")
        as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(self.pg_dir), "-U", "postgres", "--auth=trust"],
                       check=True, capture_output=True, timeout=120)
        self.pg_ctl("start")
        return f"postgres://postgres@{HOST}:{self.pg_port}/postgres"

    def start_redis(self) -> subprocess.Popen:
        """A Redis server of the benchmark's own (a restart must not touch anyone else's), append-only."""
        proc = subprocess.Popen(["redis-server", "--port", str(self.redis_port), "--bind", HOST, "--save", "",
                                 "--appendonly", "yes", "--dir", str(self.scratch)],
                                stdout=open(self.scratch / "redis.log", "ab"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        import redis

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                redis.Redis(host=HOST, port=self.redis_port).ping()
                return proc
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("redis-server did not come up: " + (self.scratch / "redis.log").read_text()[-1000:])

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        try:
            import redis

            redis.Redis.from_url(self.env["REDIS_URL"]).delete(self.queue, f"gpu.{self.hardware}")
        except Exception:
            pass
        if self.pg_name:
            from django.db import connections

            connections.close_all()
            import psycopg

            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {self.pg_name} WITH (FORCE)")
        if self.pg_dir is not None:
            self.pg_ctl("stop", "-m", "immediate")
        if self.redis_server is not None and self.redis_server.poll() is None:
            self.redis_server.terminate()
            self.redis_server.wait(30)


def seed(stack: Stack, runs: int) -> dict:
    """Users, theses, runs and candidates made through the real services."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    from loop.roles import ensure_groups
    from tests.console import builders

    ensure_groups()
    User = get_user_model()
    alice = User.objects.create_user(username="alice", password=uuid.uuid4().hex)
    alice.groups.add(Group.objects.get(name="reviewer"))
    made = []
    for i in range(runs):
        run = builders.make_run(alice, hardware=stack.hardware, budget_candidates=100000)
        for j in range(3):
            builders.evaluated(run, builders.cpu_report(), tag=f"seed{i}-{j}")
        made.append(run)
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    return {
        "runs": [r.pk for r in made],
        "candidates": list(made[0].candidates.values_list("pk", flat=True)),
        "thesis": made[0].thesis_id,
        "cookie": cookie,
        "user": alice,
    }


def producer(runs: list[int], rate_hz: float, stop: threading.Event, counts: dict) -> None:
    """Candidates and progress events through the services, at rate_hz, until stop."""
    from django.db import close_old_connections, connection

    from loop.models import Run
    from tests.console import builders

    i = 0
    next_t = time.monotonic()
    while not stop.is_set():
        try:
            run = Run.objects.get(pk=runs[i % len(runs)])
            candidate = builders.dispatch(builders.submit(run, tag=f"load{i}"))
            builders.progress(candidate, "verify")
            counts["candidates"] += 1
        except Exception as e:  # recorded, not hidden: the figures say how many writes failed
            counts["errors"] += 1
            counts.setdefault("last_error", repr(e)[:300])
            connection.close()  # a restarted database: the next write opens a new connection
        i += 1
        next_t += 1 / rate_hz
        stop.wait(max(0.0, next_t - time.monotonic()))
    close_old_connections()


# --- the load --------------------------------------------------------------------------------------------


async def drive(stack: Stack, world: dict, *, rate: float, duration_s: float, clients: int,
                fault: str | None = None) -> dict:
    port, cookie = stack.port, world["cookie"]
    fault_at = [] if fault is None else [None]  # set to the monotonic time of the fault when it is injected
    origin = f"http://{HOST}:{port}"
    paths = ["/", "/theses/", f"/theses/{world['thesis']}/", "/audit/", "/deployments/", "/skills/"]
    paths += [f"/runs/{pk}/" for pk in world["runs"]] + [f"/candidates/{pk}/" for pk in world["candidates"]]

    sockets, connect_errors = [], 0
    received: list[dict] = [{} for _ in range(clients)]  # client -> {seq: latency_ms}
    closed_early = [0]

    reconnects: list[float] = []  # seconds from a socket's loss to its reconnection, as live.js does

    async def listen(i: int, ws: WebSocket):
        while True:
            try:
                text = await ws.recv()
            except (asyncio.IncompleteReadError, ConnectionError):
                text = None
            if text is None:
                if not fault_at:  # no fault was injected: a closed socket is a failure
                    closed_early[0] += 1
                    return
                lost_at = time.monotonic()
                while time.monotonic() - lost_at < 60:  # reconnect (the HTTP re-read below stands for resync)
                    await asyncio.sleep(0.5)
                    try:
                        ws = sockets[i] = await WebSocket.connect(port, f"/ws/runs/{run_of[i]}/", cookie=cookie,
                                                                  origin=origin)
                        reconnects.append(time.monotonic() - lost_at)
                        break
                    except (OSError, ConnectionError, asyncio.TimeoutError, ValueError):
                        continue
                else:
                    closed_early[0] += 1
                    return
                continue
            now = time.time()
            msg = json.loads(text)
            if "joined" in msg:  # the socket's first message: the group's newest seq (console/consumers.py)
                continue
            created = dt.datetime.fromisoformat(msg["created"]).timestamp()
            received[i][msg["seq"]] = (now - created) * 1000

    run_of = [world["runs"][i % len(world["runs"])] for i in range(clients)]
    for i in range(clients):
        try:
            ws = await WebSocket.connect(port, f"/ws/runs/{run_of[i]}/", cookie=cookie, origin=origin)
        except (OSError, ConnectionError, asyncio.TimeoutError):
            connect_errors += 1
            sockets.append(None)
            continue
        sockets.append(ws)
    listeners = [asyncio.create_task(listen(i, ws)) for i, ws in enumerate(sockets) if ws is not None]
    await asyncio.sleep(1.0)  # every group_add done before the first event

    from loop.models import Event

    baseline = await asyncio.to_thread(
        lambda: Event.objects.order_by("-id").values_list("id", flat=True).first() or 0
    )
    stop = threading.Event()
    counts = {"candidates": 0, "errors": 0}
    prod = threading.Thread(
        target=producer, args=(world["runs"], max(1.0, rate / 10), stop, counts), daemon=True
    )
    prod.start()

    latencies, statuses, errors = [], {}, 0
    timeline: list[tuple[float, bool]] = []  # (answered at, ok) per request: errors and recovery around a fault
    sem = asyncio.Semaphore(256)

    async def one(path: str):
        nonlocal errors
        async with sem:
            t0 = time.perf_counter()
            try:
                status, _ = await http_get(port, path, cookie)
            except (OSError, asyncio.TimeoutError, ValueError, IndexError):
                status = "exception"
            latencies.append((time.perf_counter() - t0) * 1000)
            timeline.append((time.monotonic(), status == 200))
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if status != 200:
                errors += 1

    cpu_before = _cpu_by_part(stack)
    t_start = time.monotonic()
    tasks = []
    total = int(rate * duration_s)
    for n in range(total):
        delay = t_start + n / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if fault and fault_at[0] is None and n >= total // 2:
            fault_at[0] = time.monotonic()
            await asyncio.to_thread(stack.inject, fault)
        tasks.append(asyncio.create_task(one(random.choice(paths))))
    _, pending = await asyncio.wait(
        tasks, timeout=60
    )  # bounded: a saturated server shows as unfinished requests
    for task in pending:
        task.cancel()
    unfinished = len(pending)
    errors += unfinished
    http_wall = time.monotonic() - t_start
    cpu_after = _cpu_by_part(stack)
    stop.set()
    await asyncio.to_thread(prod.join, 30)
    await asyncio.sleep(3.0)  # in-flight pushes arrive

    # ground truth: the database; recovery path: the run's audit CSV over HTTP
    def truth():
        from django.db import connection

        from loop.models import Event

        connection.close()  # this thread's connection may predate a database restart

        return {
            pk: set(Event.objects.filter(run_id=pk, id__gt=baseline).values_list("id", flat=True))
            for pk in world["runs"]
        }

    expected_by_run = await asyncio.to_thread(truth)
    missed = recovered = lost = delivered = 0
    resync_errors = 0
    ws_latencies = []
    csv_cache: dict[int, set] = {}
    for i, ws in enumerate(sockets):
        if ws is None:
            continue
        expected = expected_by_run[run_of[i]]
        got = set(received[i]) & expected
        delivered += len(got)
        ws_latencies += [received[i][s] for s in got]
        gap = expected - got
        missed += len(gap)
        if gap:
            if run_of[i] not in csv_cache:
                status, body = await http_get(
                    port, f"/audit/export.csv?run={run_of[i]}", cookie, timeout_s=60
                )
                if status != 200:
                    resync_errors += 1
                rows = list(csv.reader(io.StringIO(body.decode())))[1:] if status == 200 else []
                csv_cache[run_of[i]] = {int(r[0]) for r in rows if r and r[0].isdigit()}
            recovered += len(gap & csv_cache[run_of[i]])
            lost += len(gap - csv_cache[run_of[i]])
    for ws in sockets:
        if ws is not None:
            await ws.close()
    for t in listeners:
        t.cancel()
    events_total = sum(len(v) for v in expected_by_run.values())
    fault_figures = None
    if fault:
        after = [(t, ok) for t, ok in timeline if t >= fault_at[0]]
        bad = [t for t, ok in after if not ok]
        fault_figures = {
            "kind": fault, "at_s": round(fault_at[0] - t_start, 1),
            "http_errors_after": len(bad),
            # from the fault to the last failed answer: how long clients saw errors
            "seconds_to_recover": round(max(bad) - fault_at[0], 2) if bad else 0.0,
            "socket_reconnects": len(reconnects),
            "reconnect_p50_s": _pct(reconnects, 0.5), "reconnect_max_s": round(max(reconnects), 2) if reconnects else None,
        }
    return {
        "fault": fault_figures,
        "http": {
            "requests": len(latencies) + unfinished,
            "unfinished": unfinished,
            "errors": errors,
            "error_rate": round(errors / max(1, len(latencies) + unfinished), 5),
            "statuses": statuses,
            "p50_ms": _pct(latencies, 0.50),
            "p95_ms": _pct(latencies, 0.95),
            "p99_ms": _pct(latencies, 0.99),
            "max_ms": round(max(latencies), 2) if latencies else None,
            "achieved_rps": round(len(latencies) / http_wall, 2),
        },
        "websocket": {
            "clients": clients,
            "connect_errors": connect_errors,
            "closed_early": closed_early[0],
            "events_written": events_total,
            "deliveries_expected": delivered + missed,
            "delivered": delivered,
            "missed_on_socket": missed,
            "recovered_by_http_resync": recovered,
            "lost": lost,
            "resync_errors": resync_errors,
            "delivery_p50_ms": _pct(ws_latencies, 0.50),
            "delivery_p95_ms": _pct(ws_latencies, 0.95),
            "delivery_p99_ms": _pct(ws_latencies, 0.99),
        },
        "producer": counts,
        # CPU seconds each part used during the load, and the web workers' and PostgreSQL's per answered request
        "cpu_s": {part: round(cpu_after[part] - cpu_before[part], 2) for part in cpu_after},
        "cpu_ms_per_request": {
            part: round(1000 * (cpu_after[part] - cpu_before[part]) / max(1, len(latencies)), 2)
            for part in ("web", "postgres")},
    }


def measure(args, *, web_workers: int, fault: str | None, rate: float, duration: float, clients: int,
            mode: str, command: str) -> dict:
    """One form: a fresh stack (scratch database, console, loop worker), the load, the figures."""
    scratch = Path(tempfile.mkdtemp(prefix="ark-console-load-"))
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11")
    redis_port = None
    if args.own_redis or fault == "redis":
        redis_port = _free_port()
        redis_url = f"redis://{HOST}:{redis_port}/0"
    database = "postgres" if fault == "postgres" else args.database
    stack = Stack(scratch, redis_url, web_workers, database, own_postgres=fault == "postgres")
    if redis_port:
        stack.redis_port = redis_port
        stack.redis_server = stack.start_redis()
    load_before = os.getloadavg()
    try:
        stack.setup_django()
        world = seed(stack, args.runs)
        stack.start_servers()
        figures = asyncio.run(drive(stack, world, rate=rate, duration_s=duration, clients=clients, fault=fault))
    finally:
        stack.stop()
        logs = {p.name: p.read_text(errors="replace")[-3000:] for p in scratch.glob("*.log")}
        shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "device": f"{platform.node()} ({os.cpu_count()} cores, {platform.processor() or platform.machine()})",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "mode": mode,
        "rate_rps": rate,
        "duration_s": duration,
        "websocket_clients": clients,
        "runs": args.runs,
        "database": f"{database} (scratch)",
        "server": f"console.serve: gunicorn, {web_workers} uvicorn worker(s)",
        "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        **figures,
    }
    if figures["http"]["errors"] or figures["websocket"]["lost"] or figures["websocket"]["connect_errors"]:
        result["server_log_tails"] = logs
    return result


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="10 req/s for 20 s, 20 websocket clients")
    parser.add_argument("--rate", type=float)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--clients", type=int)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--web-workers", default="1",
                        help="uvicorn workers under gunicorn (console.serve); a list (1,2,4) measures each in turn")
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--fault", default="",
                        help="web, redis or postgres, or a list of them: each its own form, the fault injected "
                             "half-way through the load, at the first --web-workers count (redis, postgres: servers "
                             "of its own)")
    parser.add_argument("--fault-duration", type=float, help="seconds of load in a fault form (default: --duration)")
    parser.add_argument("--own-redis", action="store_true", help="start a Redis server of its own (--fault redis)")
    parser.add_argument("--out", default=str(ROOT / "bench/results/console-load.json"))
    args = parser.parse_args(argv)
    faults = [f for f in args.fault.split(",") if f]
    unknown = [f for f in faults if f not in ("web", "redis", "postgres")]
    if unknown:
        parser.error(f"unknown fault {unknown[0]!r}: web, redis or postgres")
    workers = _ints(args.web_workers)
    mode = "short" if args.short else "custom" if (args.rate or args.duration or args.clients) else "full"
    rate = args.rate or (10.0 if args.short else 50.0)
    duration = args.duration or (20.0 if args.short else 300.0)
    clients = args.clients or (20 if args.short else 200)
    command = "python bench/console_load.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still stops the console and the worker
    forms = [(w, None, duration) for w in (workers if not faults else [])]
    forms += [(workers[0], f, args.fault_duration or duration) for f in faults]
    if len(forms) == 1:
        w, fault, seconds = forms[0]
        results = [measure(args, web_workers=w, fault=fault, rate=rate, duration=seconds, clients=clients, mode=mode,
                           command=command)]
        print(json.dumps(results[0], indent=2), flush=True)
    else:  # each form in a fresh process: Django is set up once per process, on one scratch database
        results = []
        for w, fault, seconds in forms:
            one = Path(tempfile.mkdtemp(prefix="ark-console-load-form-")) / "form.json"
            cmd = [sys.executable, __file__, "--rate", str(rate), "--duration", str(seconds), "--clients", str(clients),
                   "--runs", str(args.runs), "--database", args.database, "--web-workers", str(w), "--out", str(one)]
            cmd += (["--fault", fault] if fault else []) + (["--own-redis"] if args.own_redis else [])
            subprocess.run(cmd, check=True)
            results.append({**json.loads(one.read_text()), "command": command, "mode": mode})
            print(json.dumps({k: results[-1][k] for k in ("server", "fault", "http", "websocket")}, indent=2),
                  flush=True)
    result = results[0] if len(results) == 1 else {"command": command, "forms": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
