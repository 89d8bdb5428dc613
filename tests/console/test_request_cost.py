"""What a page costs in database queries does not grow with what it shows (docs/scaling.md, What a request
costs), and the one-query permission backend (console/auth.py) answers what Django's ModelBackend answers."""

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.auth import PermissionsInOneQuery, group_names
from tests.console import builders

pytestmark = pytest.mark.django_db


def _queries(client, url) -> int:
    client.get(url)  # the first request may fill per-process caches (templates, content types)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(captured)


def test_the_dashboard_costs_the_same_queries_for_one_active_run_and_for_five(alice, as_alice):
    builders.evaluated(builders.make_run(alice), builders.passing_report())
    one = _queries(as_alice, reverse("dashboard"))
    for _ in range(4):
        builders.evaluated(builders.make_run(alice, hardware="b200"), builders.passing_report())
    assert _queries(as_alice, reverse("dashboard")) == one


def test_a_thesis_page_costs_the_same_queries_for_one_run_and_for_four(alice, as_alice):
    first = builders.make_run(alice)
    builders.evaluated(first, builders.passing_report())
    one = _queries(as_alice, reverse("thesis", args=[first.thesis_id]))
    for _ in range(3):
        builders.evaluated(builders.make_run(alice, thesis=first.thesis), builders.passing_report())
    assert _queries(as_alice, reverse("thesis", args=[first.thesis_id])) == one


def test_a_run_page_costs_the_same_queries_for_three_candidates_and_for_sixty(alice, bob, as_alice):
    run = builders.make_run(alice, budget_candidates=100)
    for i in range(3):
        builders.evaluated(run, builders.passing_report(), tag=f"a{i}")
    few = _queries(as_alice, reverse("run", args=[run.pk]))
    for i in range(57):  # some submitted by a person: a row names its author
        author = (alice, bob, None)[i % 3]
        builders.progress(builders.dispatch(builders.submit(run, tag=f"b{i}", author=author)), "verify")
    assert _queries(as_alice, reverse("run", args=[run.pk])) == few
    assert few <= 13  # session, user, roles with permissions, and the page's own ten


def test_a_candidate_page_reads_its_evaluations_once(alice, as_alice):
    candidate = builders.evaluated(builders.make_run(alice), builders.passing_report())
    with CaptureQueriesContext(connection) as captured:
        assert as_alice.get(reverse("candidate", args=[candidate.pk])).status_code == 200
    with_report = [q for q in captured if 'FROM "loop_evaluation"' in q["sql"] and '"loop_evaluation"."report"' in q["sql"]]
    assert len(with_report) == 1, [q["sql"][:120] for q in with_report]


@pytest.mark.parametrize("who", ["alice", "charlie", "dana", "direct", "superuser", "inactive"])
def test_the_one_query_backend_grants_what_model_backend_grants(request, django_user_model, who):
    if who in ("alice", "charlie", "dana"):
        user = request.getfixturevalue(who)
    elif who == "direct":  # a permission given to the user, not through a group
        user = request.getfixturevalue("charlie")
        user.user_permissions.add(Permission.objects.get(codename="promote"))
    elif who == "superuser":
        user = django_user_model.objects.create_superuser("root", password="x" * 12)
    else:
        user = request.getfixturevalue("alice")
        user.is_active = False
    fresh = django_user_model.objects.get(pk=user.pk)
    fresh.is_active = user.is_active
    with CaptureQueriesContext(connection) as captured:
        ours = PermissionsInOneQuery().get_all_permissions(fresh)
    assert len(captured) <= 1
    expected = ModelBackend().get_all_permissions(django_user_model.objects.get(pk=user.pk)) if user.is_active else set()
    assert ours == expected
    assert ("loop.promote" in ours) == (who in ("dana", "direct", "superuser"))
    again = django_user_model.objects.get(pk=user.pk)
    assert group_names(again) == set(user.groups.values_list("name", flat=True))  # the header's roles


def test_a_page_reads_the_users_groups_and_permissions_in_one_query(as_bob):
    as_bob.get(reverse("theses"))
    with CaptureQueriesContext(connection) as captured:
        page = as_bob.get(reverse("theses")).content.decode()
    auth = [q["sql"] for q in captured if '"auth_group' in q["sql"] or '"auth_permission"' in q["sql"]]
    assert len(auth) == 1, auth
    assert "bob · reviewer" in page and 'href="/theses/new/"' in page  # the role, and a button the role allows
