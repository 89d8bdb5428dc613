import pytest


@pytest.mark.django_db
def test_anonymous_users_are_sent_to_the_login_page(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.url.startswith("/login/")


@pytest.mark.django_db
def test_login_then_dashboard_then_logout(client, charlie):
    response = client.post("/login/", {"username": "charlie", "password": "charlie-password-1"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_a_wrong_password_shows_an_error_not_a_traceback(client, charlie):
    response = client.post("/login/", {"username": "charlie", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


@pytest.mark.django_db
def test_a_missing_page_is_a_404_page(client, charlie):
    client.force_login(charlie)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
