"""Websockets are same-origin only: the Origin header must equal the scheme, host and port the socket was
opened on (its Host header, ws -> http, wss -> https), or one of DJANGO_CSRF_TRUSTED_ORIGINS exactly; the host
must be in ALLOWED_HOSTS. Channels' AllowedHostsOriginValidator compares host names only, so a page served
from any other port of an allowed host (another local service) could open the console's socket with the
visitor's session. Behind a TLS proxy, list the public origin in DJANGO_CSRF_TRUSTED_ORIGINS."""

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


def _header(scope, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1").strip()
    return ""


def origin_allowed(scope) -> bool:
    origin, host = _header(scope, b"origin").lower(), _header(scope, b"host").lower()
    if not origin or not host:
        return False
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    trusted = {o.lower().rstrip("/") for o in settings.CSRF_TRUSTED_ORIGINS}
    return origin == f"{scheme}://{host}" or origin in trusted


class SameOriginValidator:
    """ASGI middleware in front of the websocket router: a socket from another origin is refused (403)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
