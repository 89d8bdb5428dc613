"""Settings for the ark console, read from the environment (django-environ).

Development defaults need nothing: SQLite under var/, Redis on 127.0.0.1:6379.
DJANGO_ENV=production requires DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS and turns on
every check of `manage.py check --deploy`.
"""

import os
from pathlib import Path

import environ

from gpu_worker.broker import BROKER_TRANSPORT_OPTIONS

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

DJANGO_ENV = env("DJANGO_ENV", default="development")
PRODUCTION = DJANGO_ENV == "production"

if PRODUCTION:
    SECRET_KEY = env("DJANGO_SECRET_KEY")
    ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")
else:
    SECRET_KEY = env("DJANGO_SECRET_KEY", default="dev-only-not-secret-ark-console")
    ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
DEBUG = env.bool("DJANGO_DEBUG", default=not PRODUCTION)
DEFAULT_EXCEPTION_REPORTER = "console.middleware.ExceptionReporter"  # closes what the debug 500 page opened
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "loop",
    "console",
]

MIDDLEWARE = [
    "console.middleware.DatabaseUnavailableMiddleware",  # first: a refused DB connection is a 503, not a 500
    "django.middleware.security.SecurityMiddleware",
    "console.static_serving.StaticFiles",  # WhiteNoise: static files, compressed by collectstatic
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "console.middleware.RefuseNulCharacters",  # after CSRF: a forged POST is refused before its body is read
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "console.views.errors.MethodNotAllowedPage",  # a 405 says in words what to do (console/views/errors.py)
]
CSRF_FAILURE_VIEW = "console.views.errors.csrf_failure"

ROOT_URLCONF = "console.urls"
ASGI_APPLICATION = "console.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.ark",
            ],
            # the console's filters (person, times, us...) on every page without a {% load %}
            "builtins": ["console.templatetags.ark"],
        },
    },
]

VAR_DIR = Path(env("ARK_VAR_DIR", default=str(BASE_DIR / "var")))
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'ark.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        # WAL lets the console read while a worker writes; IMMEDIATE takes the write lock up front.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # Workers started by tests must see the test database, so it is a file, not :memory:;
    # one per test process, so that parallel test runs never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-ark-{os.getpid()}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
    # Under ASGI each request may run in a new thread, so a connection is not kept per thread
    # (CONN_MAX_AGE 0): each process keeps a bounded psycopg pool instead, sized from the server's
    # connection limit by console/serve.py (docs/scaling.md). An exhausted pool waits ARK_DB_POOL_TIMEOUT_S,
    # then the request gets a 503 with Retry-After (console/middleware.py).
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    if env.int("ARK_DB_POOL_MAX", default=8) > 0:
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("ARK_DB_POOL_MIN", default=1),
            "max_size": env.int("ARK_DB_POOL_MAX", default=8),
            "timeout": env.float("ARK_DB_POOL_TIMEOUT_S", default=5.0),
        }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        # channels_redis with a socket read timeout longer than its blocking wait (console/channel_layer.py):
        # with redis-py 8's 5 s default both were 5 s and idle sockets dropped every ~6 s.
        "BACKEND": "console.channel_layer.RedisChannelLayer",
        # redis-py 8 caps a pool at 100 connections and raises MaxConnectionsError past it: 200 sockets
        # leaving at once (group_discard each) went past it. A process's sockets share one pool (docs/scaling.md).
        "CONFIG": {"hosts": [{"address": REDIS_URL,
                              "max_connections": env.int("ARK_REDIS_MAX_CONNECTIONS", default=1000)}],
                   "capacity": 1000, "expiry": 30,
                   "brpop_timeout": env.float("ARK_CHANNEL_WAIT_S", default=5.0)},
    }
}

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# gpu_worker.queues.LOOP_QUEUE reads the same variable. Settings must not import that module: it fixes the
# name at import, and settings load before a test run names its own queue (tests/conftest.py).
CELERY_TASK_DEFAULT_QUEUE = env("ARK_LOOP_QUEUE", default="loop")
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = BROKER_TRANSPORT_OPTIONS  # the GPU worker's too: gpu_worker/broker.py

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Pieces of pages that are pure functions of their key, so nothing is ever invalidated and each process keeps
    # its own (docs/scaling.md, What a request costs): {% cache %} rows (an audit row by its event's id and hash,
    # a run page's row by everything it shows) and highlighted sources and diffs (by the text's digest; fewer of
    # them, a source may be large).
    "template_fragments": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "fragments",
                           "TIMEOUT": 3600, "OPTIONS": {"MAX_ENTRIES": 5000}},
    "highlighted": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "highlighted",
                    "TIMEOUT": 3600, "OPTIONS": {"MAX_ENTRIES": 256}},
}
# Login throttling (django-axes, its failures in the database): AXES_* below take these two.
ARK_LOGIN_MAX_FAILURES = env.int("ARK_LOGIN_MAX_FAILURES", default=5)
ARK_LOGIN_LOCKOUT_S = env.float("ARK_LOGIN_LOCKOUT_S", default=900.0)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env("ARK_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
# collectstatic (scripts/run) writes each file with .gz (and .br with brotli) beside it; WhiteNoise sends the
# compressed one to a browser that accepts it (plotly's bundle: 4.7 MB, about 1.4 MB gzipped). Without a
# collected tree (development, tests) it serves the source files from the finders, uncompressed.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = env.bool("ARK_STATIC_FINDERS", default=DEBUG or not (STATIC_ROOT / "ark").is_dir())
# plotly.js comes from the plotly package itself, served as static/plotly/plotly.min.js.
STATICFILES_DIRS = [
    BASE_DIR / "console" / "static",
    ("plotly", Path(__import__("plotly").__file__).parent / "package_data"),
]

SKILLS_DIR = Path(env("ARK_SKILLS_DIR", default=str(BASE_DIR / "skills")))
# Where "Export to files" writes (a folder the user names inside it): outside the checkout, never its git tree.
ARK_EXPORT_DIR = Path(env("ARK_EXPORT_DIR", default=str(Path.home() / ".local" / "share" / "ark" / "exports")))
SERVING_EXPORT_DIR = Path(env("ARK_SERVING_EXPORT_DIR", default=str(VAR_DIR / "serving")))
ARK_HEARTBEAT_TIMEOUT_S = env.int("ARK_HEARTBEAT_TIMEOUT_S", default=60)
# A promotion of GPU-timed candidates needs a confirming independent re-timing (docs/keep-rule.md). Off only
# for a deployment that accepts its one worker's word, e.g. while the second GPU is away.
ARK_PROMOTION_NEEDS_RETIMING = env.bool("ARK_PROMOTION_NEEDS_RETIMING", default=True)
# Four eyes (docs/domain.md, Review): the submitter or run starter of a candidate may not approve or promote it
# alone; on for everyone, or for the members of the named groups (teams). Both off by default.
ARK_FOUR_EYES = env.bool("ARK_FOUR_EYES", default=False)
ARK_FOUR_EYES_TEAMS = env.list("ARK_FOUR_EYES_TEAMS", default=[])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("ARK_LOG_LEVEL", default="INFO")},
}

if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"

CELERY_BEAT_SCHEDULE = {
    # Publishes outbox rows whose after-commit publish was lost, re-queues candidates whose worker died
    # (expired leases) and advances the runs it changed or that stalled (loop/services/reaper.py).
    "reap": {"task": "loop.reap",  # gpu_worker.queues.Task.LOOP_REAP; test_queue_names checks they agree
              "schedule": env.float("ARK_REAP_INTERVAL_S", default=15.0)},
}

# Leases: a running candidate whose worker sends no heartbeat for ARK_LEASE_S is re-queued (or failed
# at its attempt cap); a queued one nobody started within ARK_QUEUE_LEASE_S likewise.
ARK_LEASE_S = env.float("ARK_LEASE_S", default=90.0)
ARK_QUEUE_LEASE_S = env.float("ARK_QUEUE_LEASE_S", default=1800.0)
# Any OpenAI-compatible endpoint for the llm proposer (vLLM, SGLang, OpenAI...). The key is read from
# ARK_LLM_API_KEY (or OPENAI_API_KEY) in the environment only: never stored, shown or logged.
ARK_LLM_BASE_URL = env("ARK_LLM_BASE_URL", default="")
ARK_LLM_MODEL = env("ARK_LLM_MODEL", default="")
ARK_LLM_TIMEOUT_S = env.float("ARK_LLM_TIMEOUT_S", default=120.0)

# --- Security (docs/security.md) -------------------------------------------------------------------------
# Named LLM endpoints, server configuration only: {"name": {"url": "https://host/v1", "key_env": "ENV_VAR",
# "models": ["model-a"]}}. A run names one; its key is sent only to its URL (loop/proposer_config.py).
ARK_LLM_ENDPOINTS = env.json("ARK_LLM_ENDPOINTS", default={})
# Hardware kinds a ping may be sent to, besides those GPU workers announce by heartbeat (loop/hardware.py).
ARK_HARDWARE_KINDS = env.list("ARK_HARDWARE_KINDS", default=["cpu", "h100", "h200", "b200"])
# The audit chain's HMAC key (default: derived from SECRET_KEY) and the anchor file outside the database
# (default: var/audit-anchor-<database>.log); loop/audit.py.
ARK_AUDIT_KEY = env("ARK_AUDIT_KEY", default="")
ARK_AUDIT_ANCHOR = env("ARK_AUDIT_ANCHOR", default="")
# Login throttling: django-axes counts failures per (normalised username, client address) in the database;
# the console's login and the password re-entry on promote and rollback go through it (console/ratelimit.py).
INSTALLED_APPS += ["axes", "csp"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "console.auth.PermissionsInOneQuery"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]
AXES_FAILURE_LIMIT = ARK_LOGIN_MAX_FAILURES
AXES_COOLOFF_TIME = __import__("datetime").timedelta(seconds=ARK_LOGIN_LOCKOUT_S)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_USERNAME_CALLABLE = "console.ratelimit.axes_username"
AXES_CLIENT_IP_CALLABLE = "console.ratelimit.client_address"
AXES_LOCKOUT_CALLABLE = "console.ratelimit.lockout_response"
AXES_VERBOSE = False
LOGGING.setdefault("loggers", {})["axes"] = {"level": "WARNING"}
# Content-Security-Policy (django-csp): scripts only from this origin (no inline script, no eval); styles may
# be inline because htmx and plotly inject theirs; chart data sits in json_script blocks, which never run.
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                  "csp.middleware.CSPMiddleware")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],  # plotly sets style attributes on the elements it draws
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],  # the live-updates websocket is same-origin (ws: matches 'self' in CSP 3)
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "object-src": ["'none'"],
    },
}
