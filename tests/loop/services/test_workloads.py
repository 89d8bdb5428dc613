"""Workload profiles: set whole, validated per cell, read back as shares."""

import pytest
from django.core.exceptions import ValidationError

from loop.models import Event, Target
from loop.services.workloads import workload_profile_set, workload_shares


@pytest.fixture
def topk(db):
    return Target.objects.create(name="dsa_topk", axes={"rows": [1, 128], "n_ctx": [4096, 262144]})


def test_a_profile_is_stored_whole_with_repeated_shapes_added_and_read_back_as_shares(topk):
    profile = workload_profile_set("dsa_topk", [({"rows": 1, "n_ctx": 4096}, 3), ({"rows": 64, "n_ctx": 131072}, 1),
                                                ({"n_ctx": 4096, "rows": 1}, 4)], source="fib:test")
    assert profile.source == "fib:test" and len(profile.cells) == 2
    shares = workload_shares(topk)
    assert shares[(("n_ctx", 4096), ("rows", 1))] == pytest.approx(7 / 8)
    assert shares[(("n_ctx", 131072), ("rows", 64))] == pytest.approx(1 / 8)
    workload_profile_set(topk, [({"rows": 4, "n_ctx": 32768}, 1.0)])  # replaces, not appends
    assert list(workload_shares(topk)) == [(("n_ctx", 32768), ("rows", 4))]
    assert Event.objects.filter(type="workload.set").count() == 2


@pytest.mark.parametrize("cells, says", [
    ([({"batch": 1}, 1)], "no axis batch"),
    ([({"rows": 1, "n_ctx": 4096}, -1)], "weight must be a finite number"),
    ([({"rows": 1.5, "n_ctx": 4096}, 1)], "integers >= 0"),
    ([({"rows": 1, "n_ctx": 4096}, 0)], "at least one cell"),
    ([("rows=1", 1, 2)], "expected (shape, weight)"),
])
def test_a_bad_cell_is_refused_by_name_and_nothing_is_stored(topk, cells, says):
    with pytest.raises(ValidationError) as error:
        workload_profile_set(topk, cells)
    assert says in str(error.value)
    assert workload_shares(topk) is None
