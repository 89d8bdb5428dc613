import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from console.origin import SameOriginValidator  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # One process serves the console and its static files (WhiteNoise middleware, compressed); a proxy may
        # serve them instead.
        "http": django_asgi_app,
        # Same origin only: scheme, host and port exactly (console/origin.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
