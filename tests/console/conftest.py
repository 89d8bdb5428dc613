import pytest
from django.test import Client


def _logged_in(user_fixture: str):
    """A fixture `as_<user>`: a test client logged in as that user fixture's user."""

    @pytest.fixture(name=f"as_{user_fixture}")
    def client(request) -> Client:
        client = Client()
        client.force_login(request.getfixturevalue(user_fixture))
        return client

    return client


as_alice, as_bob, as_charlie, as_dana = (_logged_in(user) for user in ("alice", "bob", "charlie", "dana"))


@pytest.fixture
def people(as_alice, as_bob, as_charlie):
    """owner, reviewer and stranger (docs/conventions.md, Tests)."""
    return {"owner": as_alice, "reviewer": as_bob, "stranger": as_charlie}


@pytest.fixture
def held_tasks(monkeypatch):
    """Services publish to the loop queue after commit; where no loop worker takes part, the messages are
    held here, so none is left in the shared broker for the next test's loop worker."""
    from loop.services import outbox  # local: it loads Django models, which wait for pytest-django to set up

    class Held:
        def send_task(self, *args, **kwargs):
            pass

    monkeypatch.setattr(outbox, "current_app", Held())
