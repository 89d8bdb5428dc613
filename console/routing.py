from django.urls import path

from console import consumers

websocket_urlpatterns = [
    path("ws/events/", consumers.EventConsumer.as_asgi()),
    path("ws/runs/<int:run_id>/", consumers.EventConsumer.as_asgi()),
]
