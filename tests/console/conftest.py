import pytest
from django.test import Client


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def as_alice(alice):
    return _client_for(alice)


@pytest.fixture
def as_bob(bob):
    return _client_for(bob)


@pytest.fixture
def as_charlie(charlie):
    return _client_for(charlie)


@pytest.fixture
def as_dana(dana):
    return _client_for(dana)


@pytest.fixture
def people(as_alice, as_bob, as_charlie):
    """owner, reviewer and stranger (docs/conventions.md, Tests)."""
    return {"owner": as_alice, "reviewer": as_bob, "stranger": as_charlie}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The fixture users are created per test; the production hasher costs ~0.5 s each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
