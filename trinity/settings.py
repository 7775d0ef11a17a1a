"""Django settings. Every value comes from the environment and fails loudly when bad.

With nothing set, the platform runs on embedded defaults under var/: a SQLite file,
a file-based cache and a filesystem Celery broker (both work across processes
without Redis), and secrets generated on first run with mode 0600.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import django_stubs_ext
import environ
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from trinity.local_secrets import create_private_file, ensure_private_var_dir, read_or_create
from trinity_contract.egress import egress_allow_parse, egress_allow_text

# Lets ModelAdmin[Model] and friends be subscripted at runtime (types for mypy).
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()


def _env_bool(name: str, default: bool) -> bool:
    raw = env.str(name, default="")
    if raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false)")


def _env_int(name: str, default: int, *, minimum: int, maximum: int) -> int:
    raw = env.str(name, default="")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name}={value} is outside {minimum}..{maximum}")
    return value


def env_secret(name: str) -> str | None:
    """The secret ``name`` from the environment, or from the file ``<name>_FILE`` names
    (a swarm or compose secret, /run/secrets/...), stripped of surrounding whitespace;
    None when neither is set. Raises ImproperlyConfigured naming the variable when both
    are set (which one wins would be a guess) or the file cannot be read; never with
    the value."""
    path = os.environ.get(f"{name}_FILE", "")
    if not path:
        return os.environ.get(name)
    if name in os.environ:
        raise ImproperlyConfigured(f"{name} and {name}_FILE are both set; set one of them")
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ImproperlyConfigured(f"{name}_FILE={path}: cannot read it ({reason})") from None


VAR_DIR = Path(env.str("TRINITY_VAR_DIR", default=str(BASE_DIR / "var")))
# What the platform's processes create is theirs alone, whoever creates it: the beat
# schedule, the filesystem broker's queues, agent homes and logs, not only the files this
# module opens 0600 itself. The few things another user must reach get their mode
# explicitly (the agents' work area and the staged CLI: agent_server/isolation.py).
os.umask(0o077)
# var/ holds the generated secrets and, in the embedded default, the SQLite file: 0700,
# and an installation that has it looser is tightened here (trinity.apps logs it).
VAR_DIR_TIGHTENED = ensure_private_var_dir(VAR_DIR)

DEBUG = _env_bool("DEBUG", False)

# SECRET_KEY unset: generated once into var/secret_key (the embedded default). Set, it
# must be a real key unless DEBUG is on: the example env file's placeholder, an empty
# value (a compose file's "SECRET_KEY=") or a short one signs sessions anyone can forge.
PLACEHOLDER_SECRET_KEYS = frozenset({"change-me-to-a-long-random-string"})
_secret_key = env_secret("SECRET_KEY")
if _secret_key is not None:
    SECRET_KEY = _secret_key.strip()
    if not DEBUG and (
        SECRET_KEY in PLACEHOLDER_SECRET_KEYS or len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5
    ):
        # Never echo the value: it is a secret even when weak.
        raise ImproperlyConfigured(
            "SECRET_KEY is the example's placeholder, empty or shorter than 50 characters; "
            'set a long random one, e.g. python -c "import secrets; '
            'print(secrets.token_urlsafe(50))" (or unset it to have one generated in var/)'
        )
else:
    SECRET_KEY = read_or_create(VAR_DIR / "secret_key", lambda: secrets.token_urlsafe(50))

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])


def _encryption_keys() -> list[str]:
    raw = env_secret("TRINITY_ENCRYPTION_KEYS") or ""
    keys = [k.strip() for k in raw.split(",") if k.strip()] if raw else []
    if not keys:
        keys = [read_or_create(VAR_DIR / "encryption.key", lambda: Fernet.generate_key().decode())]
    for index, key in enumerate(keys):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            # Never echo the value: it is a secret even when malformed.
            raise ImproperlyConfigured(
                f"TRINITY_ENCRYPTION_KEYS: key #{index + 1} is not a valid Fernet key "
                "(32 url-safe base64-encoded bytes)"
            ) from None
    return keys


# The first key encrypts; every key decrypts (rotation: prepend a new key, run
# `manage.py rotate_encryption_keys`, then drop the old one).
TRINITY_ENCRYPTION_KEYS = _encryption_keys()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # API tokens stored as digests (trinity.authentication.ThrottledTokenAuthentication).
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "trinity",
    "agents",
    "subscriptions",
    "execution",
    "gateway",
]

MIDDLEWARE = [
    # Outermost, so that it sees the response last: an event stream's connections go
    # back before the first byte of it does (trinity/middleware.py).
    "trinity.middleware.EventStreamReleasesConnections",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "trinity.urls"
WSGI_APPLICATION = "trinity.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = env_secret("DATABASE_URL") or ""
if _database_url and _database_url.split(":", 1)[0] not in environ.Env.DB_SCHEMES:
    raise ImproperlyConfigured(
        f"DATABASE_URL has unsupported scheme {_database_url.split(':', 1)[0]!r} "
        "(use postgres://... or sqlite:///...)"
    )
try:
    DATABASES: dict[str, dict[str, Any]] = {
        "default": env.db_url_config(_database_url or f"sqlite:///{VAR_DIR / 'trinity.sqlite3'}")
    }
except (environ.ImproperlyConfigured, ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker, beat, the sampler's threads) share the file.
    # IMMEDIATE transactions take the write lock at BEGIN and wait up to `timeout` for
    # it; a deferred one that upgrades from reading to writing fails at once with
    # "database is locked", which the cache would read as "marker held elsewhere".
    # WAL lets readers run beside the writer.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # SQLite creates the file with the umask's mode (0644: every local user could read
    # the tokens' digests, sessions and encrypted credentials) and gives -wal and -shm
    # the database file's mode, so the file is made 0600 first; trinity.apps tightens
    # a file made otherwise (an older install, the test runner) on each connection.
    create_private_file(Path(DATABASES["default"]["NAME"]))
    # A file, not Django's default shared in-memory database: that one locks whole
    # tables, so threads (the sampler's probes, the live test server) collide on it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-trinity.sqlite3")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# Keep a connection across requests (per web thread, per worker process): opening one
# costs Postgres a new backend process, about 4 ms here, twice the turn path's budget.
# Health-checked before reuse, so a restarted database costs one failed check.
DATABASES["default"].setdefault("CONN_MAX_AGE", 600)
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
# The ASGI web (deploy/gunicorn.conf.py sets TRINITY_DB_POOL=1) runs each request on a
# thread of its own, so a connection kept per thread would be a new one per request
# (4 ms, above): there a pool per process lends one to each request and takes it back
# at its end. Its size bounds the process's connections: WEB_THREADS requests inside
# Django plus the streamed turns and streams' reads beside them.
TRINITY_DB_POOL = env.bool("TRINITY_DB_POOL", default=False)
# Streamed turns (``"stream": true``) run in threads of the web process beside the
# requests, each holding a connection for its turn: at most this many per process.
TRINITY_WEB_STREAMED_TURNS = _env_int("TRINITY_WEB_STREAMED_TURNS", 8, minimum=1, maximum=256)
TRINITY_DB_POOL_MAX = _env_int(
    "TRINITY_DB_POOL_MAX",
    # WEB_THREADS requests inside Django (trinity/asgi.py) + the streamed turns + 2.
    _env_int("WEB_THREADS", 32, minimum=2, maximum=256) + TRINITY_WEB_STREAMED_TURNS + 2,
    minimum=4,
    maximum=500,
)
if TRINITY_DB_POOL and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Django has the pool check a connection before it lends it.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": TRINITY_DB_POOL_MAX,
        # How long a request waits to borrow one. The pool holds one for each request
        # and streamed turn the process admits, so this is spent only while the database
        # does not answer or has just come back (the pool reconnects with a backoff);
        # /readyz borrows with a probe's shorter wait (trinity/health.py).
        "timeout": 10,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_secret("REDIS_URL") or ""
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(
        "REDIS_URL must start with redis://, rediss:// or unix:// "
        f"(got scheme {REDIS_URL.split(':', 1)[0]!r})"
    )

# The embedded default's cache. The database cache, not the file cache: its add() is
# atomic (an insert on the key's primary key), which the leader lock and single-flight
# markers rely on across processes, and get_many is one query. `make run` creates its
# table. Django's backend, storing JSON where Django stores a pickle
# (trinity/cache_json.py).
DATABASE_CACHE: dict[str, Any] = {
    "BACKEND": "trinity.cache_json.JsonDatabaseCache",
    "LOCATION": "trinity_cache",
    "KEY_PREFIX": "trinity",
    # One snapshot per subscription plus markers; the default cull at 300
    # entries would silently drop readings.
    "OPTIONS": {"MAX_ENTRIES": 100_000},
}
if REDIS_URL:
    CACHES: dict[str, dict[str, Any]] = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                # A cache outage must not hang a turn: fail fast and let callers
                # treat the store as unreachable.
                "SOCKET_CONNECT_TIMEOUT": 1,
                "SOCKET_TIMEOUT": 1,
                # JSON, never pickle: whatever reaches Redis can write a key, and a
                # value read back must not be able to run code (trinity/cache_json.py).
                "SERIALIZER": "trinity.cache_json.JsonSerializer",
                "CLIENT_CLASS": "trinity.cache_json.JsonCacheClient",
            },
            "KEY_PREFIX": "trinity",
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CACHES = {"default": DATABASE_CACHE}
    CELERY_BROKER_URL = "filesystem://"
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        # Without it kombu creates ./control in whatever directory the process runs in.
        "control_folder": str(_broker_dir / "control"),
    }

# JSON only, both ways: a message on the broker is written by whatever reaches it, and
# one in pickle (or any other format that can name code) is refused unread.
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_EVENT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["application/json"]
CELERY_RESULT_ACCEPT_CONTENT = ["application/json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = _env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = "UTC"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS: list[Path | tuple[str, Path]] = []

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated call with the first class's
    # WWW-Authenticate, so it is a 401 ("Token") rather than a 403 (session auth has
    # none). The panel's session still authenticates, with CSRF enforced on writes.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "trinity.authentication.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only: in DRF's form parsing a missing boolean reads as False (an unticked
    # checkbox), so an empty form PUT turned a switch off. Anything else is a 415.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_SCHEMA_CLASS": "trinity.schema.AutoSchema",
    "EXCEPTION_HANDLER": "trinity.api.exception_handler",
    "UNAUTHENTICATED_USER": None,
}


# Failed sign-ins a count may hold in a sliding minute before the next attempt on it is
# refused unchecked: per account and address, per account, distinct accounts per
# address, wrong tokens per address (trinity/sign_in_throttle.py).
TRINITY_SIGN_IN_FAILURES_PER_MINUTE = _env_int(
    "TRINITY_SIGN_IN_FAILURES_PER_MINUTE", 10, minimum=1, maximum=1000
)


def _api_token_ttl() -> timedelta | None:
    days = _env_int("TRINITY_API_TOKEN_TTL_DAYS", 0, minimum=0, maximum=3650)
    return timedelta(days=days) if days else None


# API tokens (django-rest-knox): the database keeps a SHA-512 digest of each 256-bit
# random key and the key's first 15 characters to find it by (one indexed lookup per
# request); the key itself is shown once, when it is issued. A token lives this long
# unless its issuer says otherwise (0: until revoked).
REST_KNOX = {
    "TOKEN_TTL": _api_token_ttl(),
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,  # a write on every request otherwise
}


def _trusted_proxies() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for raw in env.str("TRINITY_TRUSTED_PROXIES", default="").split(","):
        if not raw.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(raw.strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"TRINITY_TRUSTED_PROXIES: {raw.strip()!r} is not an address or CIDR network"
            ) from None
    return networks


# The proxies whose X-Forwarded-For counts (comma-separated addresses or CIDRs; none by
# default): the client is the rightmost hop that is not one of them
# (trinity.authentication.client_address). Throttles and log lines use that address.
TRINITY_TRUSTED_PROXIES = _trusted_proxies()

# Single sign-on through the team's OpenID Connect provider (trinity/sso/,
# docs/flows/sso.md). Off unless the discovery URL is set (the provider's issuer, or its
# .well-known/openid-configuration); then the endpoints and signing keys come from it.
TRINITY_OIDC_DISCOVERY_URL = env.str("TRINITY_OIDC_DISCOVERY_URL", default="").strip()
TRINITY_OIDC_CLIENT_ID = env.str("TRINITY_OIDC_CLIENT_ID", default="").strip()
TRINITY_OIDC_CLIENT_SECRET = env.str("TRINITY_OIDC_CLIENT_SECRET", default="").strip()
TRINITY_OIDC_SCOPES = env.str("TRINITY_OIDC_SCOPES", default="openid email profile").strip()
# The claim that lists a user's groups, and the group whose members are admins (unset:
# sign-in never changes who is an admin).
TRINITY_OIDC_GROUPS_CLAIM = env.str("TRINITY_OIDC_GROUPS_CLAIM", default="groups").strip()
TRINITY_OIDC_ADMIN_GROUP = env.str("TRINITY_OIDC_ADMIN_GROUP", default="").strip()
TRINITY_OIDC_PROVIDER_NAME = env.str(
    "TRINITY_OIDC_PROVIDER_NAME", default="your identity provider"
).strip()
# Off: only the break-glass users below may sign in with a password (panel, admin, API).
TRINITY_LOCAL_PASSWORDS = _env_bool("TRINITY_LOCAL_PASSWORDS", True)
TRINITY_BREAK_GLASS_USERS = [
    name.strip()
    for name in env.str("TRINITY_BREAK_GLASS_USERS", default="admin").split(",")
    if name.strip()
]
if TRINITY_OIDC_DISCOVERY_URL:
    from trinity.sso.config import check_discovery_url

    check_discovery_url(TRINITY_OIDC_DISCOVERY_URL)
    if not TRINITY_OIDC_CLIENT_ID:
        raise ImproperlyConfigured("TRINITY_OIDC_DISCOVERY_URL is set: set TRINITY_OIDC_CLIENT_ID")
    if "openid" not in TRINITY_OIDC_SCOPES.split():
        raise ImproperlyConfigured("TRINITY_OIDC_SCOPES must include openid")
elif not TRINITY_LOCAL_PASSWORDS:
    raise ImproperlyConfigured(
        "TRINITY_LOCAL_PASSWORDS=false needs single sign-on (TRINITY_OIDC_DISCOVERY_URL): "
        "otherwise only the break-glass users could sign in"
    )
INSTALLED_APPS.append("trinity.sso")
# Passwords through trinity.sso.backends (it refuses them when local passwords are off),
# the provider's sign-in through the OIDC backend (it answers only its own callback).
AUTHENTICATION_BACKENDS = [
    "trinity.sso.backends.LocalPasswordBackend",
    "trinity.sso.backends.SsoBackend",
]

# Behind a TLS-terminating proxy (the compose example): cookies only over HTTPS, HSTS,
# and the proxy's X-Forwarded-Proto says a request came in over HTTPS. The proxy must
# set that header itself (overwriting a client's), or a client could claim HTTPS.
# Off for the embedded default, which serves plain HTTP on loopback.
TRINITY_HTTPS = _env_bool("TRINITY_HTTPS", False)
if TRINITY_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = _env_int(
        "TRINITY_HSTS_SECONDS", 365 * 24 * 3600, minimum=0, maximum=2 * 365 * 24 * 3600
    )
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("TRINITY_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = False
    # A request that reached us over plain HTTP through the proxy is redirected; the
    # health check and the metrics scrape come from inside the network without the
    # proxy, so they stay answerable over HTTP.
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz/?$", r"^readyz/?$", r"^metrics/?$"]

SPECTACULAR_SETTINGS = {
    "TITLE": "Trinity API",
    "DESCRIPTION": "Subscriptions, agents and turns. Tokens are write-only.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Served from the installed package: the docs UI works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name per choice set used by several fields (an agent's boot credential and
    # an execution's "served by"; an agent's recorded state and its health).
    "ENUM_NAME_OVERRIDES": {
        "AuthModeEnum": "agents.models.AuthMode",
        "ProcessStateEnum": "agents.models.ProcessState",
        # An agent's routing policy and the system's default for new agents.
        "RoutingPolicyEnum": "trinity.models.RoutingPolicy",
        "RoutingStrategyEnum": "trinity.models.RoutingStrategy",
        "WaitPolicyEnum": "agents.models.WaitPolicy",
        # A subscription's provider and an agent's (its runtime's).
        "ProviderEnum": "subscriptions.models.Provider",
        # A notification's level and a notification channel's minimum level.
        "NotificationLevelEnum": "trinity.models.Notification.Level",
        # A gateway key's status (active, expired, revoked).
        "GatewayKeyStatusEnum": "gateway.selectors.KEY_STATUSES",
        # A notification channel's kind (beside the week plan entry's, also "kind").
        "NotificationChannelKindEnum": "trinity.models.NotificationChannel.Kind",
        # A week plan entry's kind: a plan, or the key (a spill).
        "PlannedKindEnum": "routing.plan_ahead.week_plan.KINDS",
        # Whom a plan is signed in with from the panel (claude, chatgpt).
        "SignInProviderEnum": "subscriptions.plan_sign_in.providers.SIGN_IN_CHOICES",
    },
}

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r} is not a logging level")
# "plain" lines for a terminal, or "json": one object per line with the execution id,
# agent and subscription where they apply (trinity_contract/log_json.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain").strip().lower()
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} is not 'plain' or 'json'")

# This process's registry of secrets (every Secret joins it), which the filter and the
# formatter redact with (trinity_contract/redaction.py).
_REDACTOR = "ext://trinity_contract.redaction.platform_redactor"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "trinity_contract.log_json.ContextFilter"},
        "redact": {"()": "trinity_contract.redaction.RedactingFilter", "redactor": _REDACTOR},
        # One record, one line: control characters in any value escaped, a traceback
        # indented (trinity_contract/log_lines.py, shared with the agent servers).
        "escape": {"()": "trinity_contract.log_lines.EscapingFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "trinity_contract.log_json.JsonFormatter", "redactor": _REDACTOR},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            # The turn's context first, then redaction over everything the line holds,
            # then the escapes of what is left.
            "filters": ["context", "redact", "escape"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # Every process logs through the one redacting handler on root. Loggers that
    # arrive with handlers of their own lose them and propagate instead: Django's
    # "django" (a DEBUG-only console and mail_admins, which mails tracebacks) and
    # "django.server" (runserver's request lines), gunicorn's error and access logs
    # in its workers, and uvicorn's (the ASGI server in those workers and under
    # `make run`; an access line carries the path and query as sent). Celery
    # installs none (trinity/celery.py answers its setup_logging signal).
    "loggers": {
        **{
            name: {"handlers": [], "propagate": True}
            for name in (
                "django",
                "django.server",
                "gunicorn.error",
                "gunicorn.access",
                "uvicorn",
                "uvicorn.error",
                "uvicorn.access",
            )
        },
        # One INFO line per HTTP request (health polls, probes) drowns everything else.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# GET /metrics (trinity/metrics.py) answers only a Bearer token, and only from these
# networks (comma-separated addresses or CIDRs; "any" for every address). Unset, the
# token is generated once into var/metrics_token (0600), like the secret key: an
# embedded install scrapes by reading that file, and loopback alone is no proof of
# anything (agents and every local user share it). Set, it must be a real one: an
# empty value (a compose file's "TRINITY_METRICS_TOKEN=") or a short one stops startup.
METRICS_TOKEN_MIN_LENGTH = 16
_metrics_token = env_secret("TRINITY_METRICS_TOKEN")
if _metrics_token is not None:
    TRINITY_METRICS_TOKEN = _metrics_token.strip()
    if len(TRINITY_METRICS_TOKEN) < METRICS_TOKEN_MIN_LENGTH or any(
        not c.isprintable() or c.isspace() for c in TRINITY_METRICS_TOKEN
    ):
        # Not echoed: it is a secret even when too short.
        raise ImproperlyConfigured(
            f"TRINITY_METRICS_TOKEN is empty, shorter than {METRICS_TOKEN_MIN_LENGTH} "
            "characters or holds spaces; set a long random one, e.g. python -c "
            '"import secrets; print(secrets.token_urlsafe(32))" (or unset it to have one '
            "generated in var/metrics_token)"
        )
else:
    TRINITY_METRICS_TOKEN = read_or_create(
        VAR_DIR / "metrics_token", lambda: secrets.token_urlsafe(32)
    )
TRINITY_METRICS_ALLOW_FROM = [
    n.strip()
    for n in env.str("TRINITY_METRICS_ALLOW_FROM", default="127.0.0.1/32,::1/128").split(",")
    if n.strip()
]
if TRINITY_METRICS_ALLOW_FROM != ["any"]:
    for _network in TRINITY_METRICS_ALLOW_FROM:
        try:
            ipaddress.ip_network(_network, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"TRINITY_METRICS_ALLOW_FROM: {_network!r} is not an address or CIDR network"
            ) from None
# prometheus_client's multiprocess mode reads this itself, at import; checked here so a
# missing directory stops the process with its name instead of at the first metric.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
if PROMETHEUS_MULTIPROC_DIR and not Path(PROMETHEUS_MULTIPROC_DIR).is_dir():
    raise ImproperlyConfigured(
        f"PROMETHEUS_MULTIPROC_DIR={PROMETHEUS_MULTIPROC_DIR!r} is not an existing directory"
    )

# How far back a refusal counts against a subscription (the 2h skip-list) and how
# long failure events are kept.
RATE_LIMIT_WINDOW_SECONDS = _env_int(
    "TRINITY_RATE_LIMIT_WINDOW_SECONDS", 2 * 3600, minimum=60, maximum=7 * 24 * 3600
)
# How long a finished turn's events (its replay, ``execution/live/``) are kept; the
# turn's row stays. An hourly beat task drops older ones, a bounded batch at a time.
TRINITY_TURN_EVENTS_RETENTION_DAYS = _env_int(
    "TRINITY_TURN_EVENTS_RETENTION_DAYS", 30, minimum=1, maximum=3650
)
RATE_LIMIT_EVENT_RETENTION_SECONDS = _env_int(
    "TRINITY_RATE_LIMIT_EVENT_RETENTION_SECONDS", 24 * 3600, minimum=3600, maximum=90 * 24 * 3600
)

# Where `make run` listens: web on PORT, the provider simulator on SIMULATOR_PORT.
# Read here so a bad value stops `make run` (its first command loads settings) before
# anything listens, and the URLs the commands print follow the same values.
PORT = _env_int("PORT", 8000, minimum=1, maximum=65535)
SIMULATOR_PORT = _env_int("SIMULATOR_PORT", 8100, minimum=1, maximum=65535)
# The gateway (``python -m gateway``): where it listens, and where the web reaches it
# (its open streams in the embedded default, which has no Redis to read them from).
TRINITY_GATEWAY_PORT = _env_int("TRINITY_GATEWAY_PORT", 8200, minimum=1, maximum=65535)
TRINITY_GATEWAY_URL = env.str(
    "TRINITY_GATEWAY_URL", default=f"http://127.0.0.1:{TRINITY_GATEWAY_PORT}"
).rstrip("/")
# How often the gateway re-reads changed keys (a revocation ends its streams this soon).
TRINITY_GATEWAY_POLL_SECONDS = _env_int("TRINITY_GATEWAY_POLL_SECONDS", 1, minimum=1, maximum=60)
# How long the gateway reuses a session's routing evidence (the breaker, the plan's
# verdict) before it reads them again; any refusal it sees drops it at once.
TRINITY_GATEWAY_EVIDENCE_SECONDS = _env_int(
    "TRINITY_GATEWAY_EVIDENCE_SECONDS", 2, minimum=0, maximum=300
)
# The largest request body the gateway reads (the Messages API's own limit).
TRINITY_GATEWAY_MAX_BODY_BYTES = _env_int(
    "TRINITY_GATEWAY_MAX_BODY_BYTES", 32 * 1024 * 1024, minimum=1024, maximum=256 * 1024 * 1024
)

# Upstream providers. `make run` points these at the local provider simulator; a real
# deployment leaves the defaults (or points at a proxy).
TRINITY_ANTHROPIC_BASE_URL = env.str(
    "TRINITY_ANTHROPIC_BASE_URL", default="https://api.anthropic.com"
).rstrip("/")
TRINITY_CODEX_BASE_URL = env.str("TRINITY_CODEX_BASE_URL", default="https://chatgpt.com").rstrip(
    "/"
)
# The OpenAI platform API an OpenAI key is spent on by a Codex agent's forwarder.
TRINITY_OPENAI_BASE_URL = env.str(
    "TRINITY_OPENAI_BASE_URL", default="https://api.openai.com"
).rstrip("/")
# Where the platform refreshes a Codex plan's ChatGPT sign-in (POST /oauth/token).
TRINITY_CODEX_AUTH_URL = env.str(
    "TRINITY_CODEX_AUTH_URL", default="https://auth.openai.com"
).rstrip("/")
# Where an admin signs a plan in from the panel (``subscriptions/plan_sign_in/``): the
# providers' authorize pages and token endpoints (Claude Code's and the Codex CLI's).
# The ChatGPT token endpoint is TRINITY_CODEX_AUTH_URL's /oauth/token, where its
# refresh goes too. `make run` and the tests point all of them at the simulator.
TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL = env.str(
    "TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL", default="https://claude.ai/oauth/authorize"
)
TRINITY_CLAUDE_OAUTH_TOKEN_URL = env.str(
    "TRINITY_CLAUDE_OAUTH_TOKEN_URL", default="https://console.anthropic.com/v1/oauth/token"
)
TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL = env.str(
    "TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL", default=TRINITY_CODEX_AUTH_URL + "/oauth/authorize"
)
# The page where a person enters a ChatGPT device-code sign-in's user code (its
# endpoints are TRINITY_CODEX_AUTH_URL's /api/accounts/deviceauth/*).
TRINITY_CHATGPT_DEVICE_URL = env.str(
    "TRINITY_CHATGPT_DEVICE_URL", default=TRINITY_CODEX_AUTH_URL + "/codex/device"
)
for _name in (
    "TRINITY_ANTHROPIC_BASE_URL",
    "TRINITY_CODEX_BASE_URL",
    "TRINITY_OPENAI_BASE_URL",
    "TRINITY_CODEX_AUTH_URL",
    "TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL",
    "TRINITY_CLAUDE_OAUTH_TOKEN_URL",
    "TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL",
    "TRINITY_CHATGPT_DEVICE_URL",
):
    if not globals()[_name].startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"{_name} must be an http(s) URL")

# How long a notification with the same dedup key stays silent.
TRINITY_NOTIFICATION_DEDUP_SECONDS = _env_int(
    "TRINITY_NOTIFICATION_DEDUP_SECONDS", 3600, minimum=1, maximum=7 * 24 * 3600
)


def _webhook_allow() -> tuple[str, ...]:
    """Hosts and CIDRs a webhook may reach although they are not public addresses."""
    import ipaddress
    import re

    entries = [e.strip().lower() for e in env.str("TRINITY_WEBHOOK_ALLOW", default="").split(",")]
    for entry in filter(None, entries):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            if not re.fullmatch(
                r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*", entry
            ):
                raise ImproperlyConfigured(
                    f"TRINITY_WEBHOOK_ALLOW: {entry!r} is neither a host name nor an IP/CIDR"
                ) from None
    return tuple(filter(None, entries))


# Webhook destinations that are loopback, link-local (cloud metadata), private, CGNAT,
# multicast or otherwise not public are refused unless listed here (trinity/webhooks.py).
TRINITY_WEBHOOK_ALLOW = _webhook_allow()

# Quotas (agents/services.py, execution/schedules/services.py, execution/services.py). Admins
# are exempt from the agents-per-operator cap: they run the fleet.
TRINITY_MAX_AGENTS_PER_OPERATOR = _env_int(
    "TRINITY_MAX_AGENTS_PER_OPERATOR", 20, minimum=1, maximum=100_000
)
TRINITY_MAX_SCHEDULES_PER_AGENT = _env_int(
    "TRINITY_MAX_SCHEDULES_PER_AGENT", 20, minimum=1, maximum=10_000
)
TRINITY_SCHEDULE_MIN_INTERVAL_SECONDS = _env_int(
    "TRINITY_SCHEDULE_MIN_INTERVAL_SECONDS", 300, minimum=60, maximum=7 * 24 * 3600
)
TRINITY_SCHEDULE_MESSAGE_MAX_CHARS = _env_int(
    "TRINITY_SCHEDULE_MESSAGE_MAX_CHARS", 20_000, minimum=1, maximum=1_000_000
)
# Queued plus running turns one agent may have at once.
TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT = _env_int(
    "TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT", 8, minimum=1, maximum=10_000
)

# Where agent servers run: "local" subprocesses (embedded default) or "docker".
TRINITY_AGENT_BACKEND = env.str("TRINITY_AGENT_BACKEND", default="local")
if TRINITY_AGENT_BACKEND not in {"local", "docker", "swarm"}:
    raise ImproperlyConfigured("TRINITY_AGENT_BACKEND must be 'local', 'docker' or 'swarm'")
TRINITY_AGENT_IMAGE = env.str("TRINITY_AGENT_IMAGE", default="trinity-agent:latest")
# The docker runtime (agents/runtimes/docker.py). Agent containers run on this network
# only, and the platform reaches their servers on it: by the container's name when the
# platform runs in a container on that network (compose), by its address on the
# network when the platform runs on the host ("address").
TRINITY_DOCKER_NETWORK = env.str("TRINITY_DOCKER_NETWORK", default="trinity-agents").strip()
if not TRINITY_DOCKER_NETWORK:
    raise ImproperlyConfigured("TRINITY_DOCKER_NETWORK must name the agents' network")
TRINITY_DOCKER_ENDPOINT = env.str("TRINITY_DOCKER_ENDPOINT", default="name")
if TRINITY_DOCKER_ENDPOINT not in {"name", "address"}:
    raise ImproperlyConfigured("TRINITY_DOCKER_ENDPOINT must be 'name' or 'address'")
# Create the network when it is missing (off under compose: compose creates it, and the
# socket proxy lets the platform create containers only). Internal: no way out of it
# but to the host (for an upstream on the host, as in the tests).
TRINITY_DOCKER_NETWORK_CREATE = _env_bool("TRINITY_DOCKER_NETWORK_CREATE", True)
TRINITY_DOCKER_NETWORK_INTERNAL = _env_bool("TRINITY_DOCKER_NETWORK_INTERNAL", False)
# Each agent container's limits, set at create and visible in `docker inspect`.
TRINITY_AGENT_MEMORY_LIMIT = env.str("TRINITY_AGENT_MEMORY_LIMIT", default="2g")
TRINITY_AGENT_CPU_MILLICORES = _env_int(
    "TRINITY_AGENT_CPU_MILLICORES", 2000, minimum=100, maximum=256_000
)
TRINITY_AGENT_PIDS_LIMIT = _env_int("TRINITY_AGENT_PIDS_LIMIT", 512, minimum=16, maximum=1_000_000)
# The private IPv4 destinations the egress guard of a container agent (docker and swarm
# runtimes) still lets its CLI and tools reach, in the canonical text each server gets:
# comma-separated addresses or networks, each with an optional TCP port
# (trinity_contract/egress.py; docs/flows/egress-guard.md). Empty: none.
try:
    TRINITY_AGENT_EGRESS_ALLOW = egress_allow_text(
        egress_allow_parse(env.str("TRINITY_AGENT_EGRESS_ALLOW", default=""))
    )
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# The swarm runtime (agents/runtimes/swarm.py; docs/flows/swarm-runtime.md): the
# agents' overlay network (made by the stack, or by the runtime when it may), whether
# it is encrypted when the runtime makes it, how the platform reaches a server (by the
# service's name on that network, or at the port published on its task's node), the
# constraints every agent's service carries and what each reserves for placement.
# The manager the runtime talks to (DOCKER_HOST when unset: the stack's docker proxy).
TRINITY_SWARM_DOCKER_HOST = env.str("TRINITY_SWARM_DOCKER_HOST", default="").strip()
TRINITY_SWARM_NETWORK = env.str("TRINITY_SWARM_NETWORK", default="trinity-agents").strip()
if not TRINITY_SWARM_NETWORK:
    raise ImproperlyConfigured("TRINITY_SWARM_NETWORK must name the agents' overlay network")
TRINITY_SWARM_NETWORK_CREATE = _env_bool("TRINITY_SWARM_NETWORK_CREATE", True)
TRINITY_SWARM_NETWORK_ENCRYPTED = _env_bool("TRINITY_SWARM_NETWORK_ENCRYPTED", True)
TRINITY_SWARM_ENDPOINT = env.str("TRINITY_SWARM_ENDPOINT", default="name")
if TRINITY_SWARM_ENDPOINT not in {"name", "published"}:
    raise ImproperlyConfigured("TRINITY_SWARM_ENDPOINT must be 'name' or 'published'")
TRINITY_SWARM_CONSTRAINTS = env.str("TRINITY_SWARM_CONSTRAINTS", default="")
TRINITY_SWARM_MEMORY_RESERVATION = env.str("TRINITY_SWARM_MEMORY_RESERVATION", default="512m")
TRINITY_SWARM_CPU_RESERVATION_MILLICORES = _env_int(
    "TRINITY_SWARM_CPU_RESERVATION_MILLICORES", 250, minimum=0, maximum=256_000
)
# The local runtime's agent work areas (the CLI's working directories and HOMEs),
# outside var/ and reachable by the agent's OS user. Unset: a directory under the
# system temp dir named after this process's user and VAR_DIR (agents/runtimes/local.py).
_work_root = env.str("TRINITY_AGENT_WORK_ROOT", default="").strip()
if _work_root and not Path(_work_root).is_absolute():
    raise ImproperlyConfigured("TRINITY_AGENT_WORK_ROOT must be an absolute path")
TRINITY_AGENT_WORK_ROOT = Path(_work_root) if _work_root else None
# No TRINITY_AGENT_USER here: as root the local runtime gives each agent an OS user of
# its own (agents/runtimes/agent_users.py) and hands its name to that agent's server.
# The variable is the agent server's own (agent_server/config.py): the user a server
# started on its own runs its CLI as (the agent image's `trinity-agent`).

# The settings panel (frontend/). Vite builds it into frontend/dist with asset URLs under
# /static/panel/assets/; staticfiles finds them there (the live test server serves them
# straight from this directory) and collectstatic copies them to STATIC_ROOT for
# WhiteNoise. trinity.panel serves dist/index.html at "/".
PANEL_DIST_DIR = BASE_DIR / "frontend" / "dist"
PANEL_DIST_DIR.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS.append(("panel", PANEL_DIST_DIR))
# Vite content-hashes every file under assets/: a new build gets new names, so browsers
# may cache these forever.
WHITENOISE_IMMUTABLE_FILE_TEST = r"^/static/panel/assets/"
# API clients get JSON for a CSRF failure; browsers elsewhere keep Django's page.
CSRF_FAILURE_VIEW = "trinity.panel.csrf_failure"

# The longest a turn may be given (its whole walk included). A sync turn holds a web
# thread for that long, so deploy/gunicorn.conf.py derives the worker timeout from it.
TRINITY_TURN_TIMEOUT_MAX_SECONDS = _env_int(
    "TRINITY_TURN_TIMEOUT_MAX_SECONDS", 780, minimum=30, maximum=6 * 3600
)
# How long one turn may run when the caller does not say (its walk included).
TRINITY_TURN_TIMEOUT_SECONDS = _env_int(
    "TRINITY_TURN_TIMEOUT_SECONDS", 600, minimum=5, maximum=TRINITY_TURN_TIMEOUT_MAX_SECONDS
)


def _env_usd(name: str, default: str) -> Decimal:
    """A positive USD amount, at most $1000."""
    raw = env.str(name, default="") or default
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an amount in USD") from None
    if not value.is_finite() or not Decimal("0") < value <= Decimal("1000"):
        raise ImproperlyConfigured(f"{name}={raw!r} is outside (0, 1000] USD")
    return value


# What a key turn reserves against the key budgets when its agent has no key-served
# turn to take the mean of yet (too low lets concurrent first turns overshoot a cap).
TRINITY_KEY_TURN_ESTIMATE_USD = _env_usd("TRINITY_KEY_TURN_ESTIMATE_USD", "0.25")

# Under the balanced strategy, whether the sampler's sweep also moves assignments
# proactively (subscriptions/headroom/rebalance.py). Off by default: on the fleet
# benchmark's traces it brought 84-128 ping-pongs for a mixed effect on key spend
# (docs/benchmarks.md).
TRINITY_REBALANCE = _env_bool("TRINITY_REBALANCE", False)

# Headroom: the sampler's cadence, how long a reading counts as evidence, and how hard
# a sweep may push the providers.
TRINITY_HEADROOM_SAMPLE_SECONDS = _env_int(
    "TRINITY_HEADROOM_SAMPLE_SECONDS", 300, minimum=30, maximum=3600
)
# Subscriptions believed limited are re-probed sooner, to see them come back.
TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS = _env_int(
    "TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS", 60, minimum=30, maximum=3600
)
TRINITY_HEADROOM_FRESH_SECONDS = _env_int(
    "TRINITY_HEADROOM_FRESH_SECONDS", 3600, minimum=60, maximum=24 * 3600
)
TRINITY_HEADROOM_CONCURRENCY = _env_int("TRINITY_HEADROOM_CONCURRENCY", 16, minimum=1, maximum=256)
TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS = _env_int(
    "TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS", 10, minimum=1, maximum=120
)
TRINITY_HEADROOM_REFRESH_FLOOR_SECONDS = _env_int(
    "TRINITY_HEADROOM_REFRESH_FLOOR_SECONDS", 60, minimum=10, maximum=3600
)
TRINITY_HEADROOM_HISTORY_DAYS = _env_int(
    "TRINITY_HEADROOM_HISTORY_DAYS", 30, minimum=1, maximum=365
)
# How long a turn is expected to run, for the exhaustion forecast: a turn starts
# elsewhere when its plan is forecast to run out sooner (capped by the turn's own
# budget). 300 s covers a typical multi-step CLI turn; 0 turns the forecast routing off.
TRINITY_FORECAST_TURN_SECONDS = _env_int(
    "TRINITY_FORECAST_TURN_SECONDS", 300, minimum=0, maximum=TRINITY_TURN_TIMEOUT_MAX_SECONDS
)
# The cheapest model the provider serves: a probe spends one output token on it.
TRINITY_HEADROOM_PROBE_MODEL = env.str("TRINITY_HEADROOM_PROBE_MODEL", default="claude-haiku-4-5")
if not TRINITY_HEADROOM_PROBE_MODEL or any(c.isspace() for c in TRINITY_HEADROOM_PROBE_MODEL):
    raise ImproperlyConfigured("TRINITY_HEADROOM_PROBE_MODEL must be a model name")
if TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS > TRINITY_HEADROOM_SAMPLE_SECONDS:
    raise ImproperlyConfigured(
        "TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS must not exceed TRINITY_HEADROOM_SAMPLE_SECONDS"
    )
if TRINITY_HEADROOM_FRESH_SECONDS < TRINITY_HEADROOM_SAMPLE_SECONDS:
    raise ImproperlyConfigured(
        "TRINITY_HEADROOM_FRESH_SECONDS must be at least TRINITY_HEADROOM_SAMPLE_SECONDS "
        "(otherwise every reading goes stale before the next sweep)"
    )

# The provider circuit breaker (subscriptions/breaker.py): provider-level failures (5xx,
# timeouts) in a sliding window, across at least MIN_CREDENTIALS distinct credentials,
# degrade it at DEGRADED_FAILURES and open it at OPEN_FAILURES for COOLDOWN seconds.
TRINITY_BREAKER_WINDOW_SECONDS = _env_int(
    "TRINITY_BREAKER_WINDOW_SECONDS", 60, minimum=1, maximum=3600
)
TRINITY_BREAKER_DEGRADED_FAILURES = _env_int(
    "TRINITY_BREAKER_DEGRADED_FAILURES", 3, minimum=1, maximum=10_000
)
TRINITY_BREAKER_OPEN_FAILURES = _env_int(
    "TRINITY_BREAKER_OPEN_FAILURES", 5, minimum=1, maximum=10_000
)
TRINITY_BREAKER_MIN_CREDENTIALS = _env_int(
    "TRINITY_BREAKER_MIN_CREDENTIALS", 2, minimum=1, maximum=1000
)
TRINITY_BREAKER_COOLDOWN_SECONDS = _env_int(
    "TRINITY_BREAKER_COOLDOWN_SECONDS", 30, minimum=1, maximum=3600
)
if TRINITY_BREAKER_OPEN_FAILURES < TRINITY_BREAKER_DEGRADED_FAILURES:
    raise ImproperlyConfigured(
        "TRINITY_BREAKER_OPEN_FAILURES must be at least TRINITY_BREAKER_DEGRADED_FAILURES"
    )

# The audit log (trinity/audit, docs/flows/audit-log.md): one entry per change request,
# append-only in the database (django-pgtrigger refuses UPDATE and DELETE on Postgres).
# Its middleware sits inside authentication (it reads the user after the view).
INSTALLED_APPS += ["pgtrigger", "trinity.audit"]
MIDDLEWARE.append("trinity.audit.middleware.AuditMiddleware")
# How long entries are kept; an hourly beat task deletes older ones in batches. 0: forever.
TRINITY_AUDIT_RETENTION_DAYS = _env_int(
    "TRINITY_AUDIT_RETENTION_DAYS", 365, minimum=0, maximum=36500
)
