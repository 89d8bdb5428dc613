# Shared by scripts/run and scripts/test: the virtual environment and the services ark needs.
set -euo pipefail
ARK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ARK_ROOT"

say() { printf '\033[1m[ark]\033[0m %s\n' "$*" >&2; }

ensure_venv() {
  local python="${ARK_PYTHON:-}"
  if [ -z "$python" ]; then
    python="$(command -v python3.11 || command -v python3)"
  fi
  if [ ! -x .venv/bin/python ]; then
    say "creating .venv with $python"
    "$python" -m venv .venv
  fi
  local stamp=.venv/.ark-installed
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    say "installing ark and its dependencies (torch is pinned to the CPU build in CI; see pyproject.toml)"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[dev,cute,fib]"
    touch "$stamp"
  fi
}

redis_answers() {
  .venv/bin/python - "$1" <<'PY' 2>/dev/null
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=2).ping()
PY
}

ensure_redis() {
  local url="${REDIS_URL:-redis://127.0.0.1:6379/0}"
  if redis_answers "$url"; then return; fi
  if ! command -v redis-server >/dev/null; then
    say "nothing answers on $url and redis-server is not installed."
    say "install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or set REDIS_URL."
    exit 1
  fi
  say "starting redis-server on 127.0.0.1:6379"
  mkdir -p var
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "$ARK_ROOT/var" --logfile "$ARK_ROOT/var/redis.log"
  for _ in $(seq 50); do redis_answers "$url" && return; sleep 0.1; done
  say "redis did not come up; see var/redis.log"; exit 1
}

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return; fi
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  for _ in $(seq 100); do pg_isready -q -h 127.0.0.1 -p 5432 && return; sleep 0.2; done
  say "PostgreSQL is not running on 127.0.0.1:5432 (Debian: apt-get install postgresql)"; exit 1
}

gpu_hardware() {
  # The hardware kind this machine's GPU worker serves, or "cpu" (Triton interpreted, CuTe compile-only).
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    .venv/bin/python -c "from gpu_worker.hardware import fingerprint; print(fingerprint()['kind'])"
  else
    echo cpu
  fi
}
