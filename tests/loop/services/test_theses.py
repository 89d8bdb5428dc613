import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from loop.models import Event, Target, Thesis
from loop.services.theses import thesis_create, thesis_edit, thesis_prioritise

pytestmark = pytest.mark.django_db


@pytest.fixture
def target():
    return Target.objects.create(name="dsa_topk", axes={"n_ctx": [4096, 262144]}, dsls=["triton"])


def create(actor, target, **kwargs):
    fields = {"title": "Incremental top-k", "body": "Keep a running top-k.", "target": target, "hardware": "h200"}
    fields.update(kwargs)
    return thesis_create(actor=actor, **fields)


def test_it_creates_a_thesis_owned_by_its_author_and_writes_an_event(alice, target):
    thesis = create(alice, target, priority=3)
    assert (thesis.owner, thesis.status, thesis.priority) == (alice, "backlog", 3)
    event = Event.objects.get(type="thesis.created")
    assert (event.actor, event.subject_id, event.payload["target"]) == ("alice", str(thesis.pk), "dsa_topk")


def test_it_refuses_a_viewer(charlie, target):
    with pytest.raises(PermissionDenied, match="lacks loop.edit_thesis"):
        create(charlie, target)
    assert not Thesis.objects.exists() and not Event.objects.exists()


def test_it_names_each_bad_field(alice, target):
    with pytest.raises(ValidationError) as caught:
        create(alice, target, title=" ", body="", hardware="")
    assert set(caught.value.error_dict) == {"title", "body", "hardware"}


def test_an_edit_records_which_fields_changed(alice, bob, target):
    thesis = create(alice, target)
    thesis_edit(actor=bob, thesis=thesis, title="Fused top-k", status="active", hardware="h200")
    event = Event.objects.get(type="thesis.edited")
    assert event.payload["fields"] == ["status", "title"] and event.actor == "bob"
    thesis.refresh_from_db()
    assert thesis.owner == alice and thesis.title == "Fused top-k"


def test_an_edit_that_changes_nothing_writes_nothing(alice, target):
    thesis = create(alice, target)
    thesis_edit(actor=alice, thesis=thesis, title=thesis.title)
    assert not Event.objects.filter(type="thesis.edited").exists()


def test_an_edit_refuses_unknown_fields_and_statuses(alice, target):
    thesis = create(alice, target)
    with pytest.raises(ValueError):
        thesis_edit(actor=alice, thesis=thesis, owner=alice)
    with pytest.raises(ValidationError):
        thesis_edit(actor=alice, thesis=thesis, status="abandoned")


def test_prioritising_twice_to_the_same_value_writes_one_event(alice, charlie, target):
    thesis = create(alice, target)
    thesis_prioritise(actor=alice, thesis=thesis, priority=7)
    thesis_prioritise(actor=alice, thesis=thesis, priority=7)
    assert Event.objects.filter(type="thesis.prioritised").count() == 1
    with pytest.raises(PermissionDenied):
        thesis_prioritise(actor=charlie, thesis=thesis, priority=1)
