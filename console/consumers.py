"""Websocket consumers only push: every action is an HTTP POST checked in a service."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from loop.broadcast import ALL_EVENTS_GROUP, newest_seq, run_group


class EventConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        run_id = self.scope["url_route"]["kwargs"].get("run_id")
        self.group = run_group(run_id) if run_id is not None else ALL_EVENTS_GROUP
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # The first message says the newest event of the group, read after joining it: an event committed
        # later is pushed to this socket, one committed before is counted here. A page rendered before that
        # event re-reads itself (console/static/ark/live.js, docs/operations.md).
        seq = await database_sync_to_async(newest_seq)(run_id)
        await self.send_json({"joined": self.group, "seq": seq})

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """Clients send nothing that changes state; anything sent is ignored."""

    async def dispatch(self, message):
        """An event is forwarded as it came, without the database: Channels' own dispatch would first hop to
        a thread to close stale database connections, once per event per socket (docs/scaling.md, "Events,
        per socket")."""
        if message["type"] == "ark.event":
            await self.ark_event(message)
        else:
            await super().dispatch(message)

    async def ark_event(self, message):
        await self.send_json({k: v for k, v in message.items() if k != "type"})
