import json

import pytest
from django.urls import reverse

from loop.models import ServingConfig
from loop.services.decisions import candidate_approve
from tests.console import builders

pytestmark = pytest.mark.django_db

SCRIPT = "</script><script>alert('src')</script>"


@pytest.fixture
def family(alice):
    # a target without a two-axis grid: its candidate page promotes through the range dialog (a grid
    # target's is promoted on its regions page, tests/console/test_candidate_regions.py)
    one_axis = builders.make_thesis(alice, target=builders.make_target("dsa_indexer_topk_fp8"))
    run = builders.make_run(alice, thesis=one_axis)
    parent = builders.evaluated(run, builders.passing_report(), tag="parent")
    candidate_approve(candidate=parent, actor=alice)
    child_source = builders.source_variant("child", body=f'NOTE = "{SCRIPT}"\n')
    child = builders.evaluated(run, builders.passing_report(speedup=1.5, findings=[]), source=child_source,
                               parent=parent)
    return run, parent, child


def test_the_candidate_page_shows_both_diffs_escaped(as_charlie, family):
    _, _, child = family
    page = as_charlie.get(reverse("candidate", args=[child.pk])).content.decode()
    assert 'data-testid="parent-diff"' in page and 'data-testid="incumbent-diff"' in page
    assert "<script>alert('src')</script>" not in page
    assert "alert" in page and "&lt;script&gt;" in page


def test_the_per_shape_chart_marks_the_crossover_and_draws_the_floor(as_charlie, family):
    _, _, child = family
    response = as_charlie.get(reverse("candidate", args=[child.pk]))
    figure = json.loads(response.context["shape_chart"] and json.dumps(response.context["shape_chart"]))
    names = [trace.get("name") for trace in figure["data"]]
    assert {"candidate", "incumbent", "default", "floor"} <= set(names)
    assert any("crossover" in (a.get("text") or "") for a in figure["layout"].get("annotations", []))
    assert response.context["analysis"]["routes"][0]["kernel"] == "candidate"


def test_guard_findings_show_the_source_lines(as_charlie, alice):
    run = builders.make_run(alice)
    candidate = builders.evaluated(run, builders.guard_report(line=7))
    page = as_charlie.get(reverse("candidate", args=[candidate.pk])).content.decode()
    assert "side_stream" in page and 'class="hit"' in page and "@triton.jit" in page


def test_the_e2e_grid_and_logs_are_shown(as_charlie, family):
    _, _, child = family
    page = as_charlie.get(reverse("candidate", args=[child.pk])).content.decode()
    assert 'data-testid="e2e-grid"' in page and "+3.0%" in page and "[benchmark] pass" in page


def test_the_promote_dialog_is_prefilled_from_range_analysis(as_dana, family):
    _, parent, _ = family
    response = as_dana.get(reverse("candidate", args=[parent.pk]))
    assert response.context["promote_form"].initial["routes"].splitlines()[0].endswith("candidate")


def promote_post(password, routes="0 100000 candidate\n100000 inf default"):
    return {"routes": routes, "note": "wins below 100K", "password": password}


@pytest.mark.parametrize("who, allowed", [("owner", False), ("reviewer", False), ("stranger", False),
                                          ("deployer", True)])
def test_only_a_deployer_promotes(people, as_dana, family, who, allowed):
    _, parent, _ = family
    client = as_dana if who == "deployer" else people[who]
    name = {"owner": "alice", "reviewer": "bob", "stranger": "charlie", "deployer": "dana"}[who]
    response = client.post(reverse("candidate_promote", args=[parent.pk]), promote_post(f"{name}-password-1"))
    if allowed:
        config = ServingConfig.objects.get()
        assert response.status_code == 302
        assert response["Location"] == reverse("deployment", args=[config.target.name, config.hardware])
        assert config.routes[0]["hi"] == 100000 and config.routes[1]["kernel"] == "default"
    else:
        assert response.status_code == 403 and not ServingConfig.objects.exists()


def test_promote_rechecks_the_password(as_dana, family):
    _, parent, _ = family
    response = as_dana.post(reverse("candidate_promote", args=[parent.pk]), promote_post("wrong"))
    assert response.status_code == 400 and b'data-testid="error-password"' in response.content
    assert b"data-open-on-load" in response.content
    assert not ServingConfig.objects.exists()


def test_promote_shows_bad_routes_next_to_the_field(as_dana, family):
    _, parent, _ = family
    response = as_dana.post(reverse("candidate_promote", args=[parent.pk]),
                            promote_post("dana-password-1", routes="0 100 candidate\n50 200 candidate"))
    assert response.status_code == 400 and b'data-testid="error-routes"' in response.content
    assert b"overlap" in response.content


def test_promoting_a_candidate_that_is_not_kept_is_refused_with_the_reason(as_dana, family):
    _, _, child = family
    response = as_dana.post(reverse("candidate_promote", args=[child.pk]), promote_post("dana-password-1"))
    assert response.status_code == 400 and b"only a kept candidate" in response.content



def test_the_candidate_page_shows_the_exact_prompt_escaped(as_charlie, family):
    from loop.models import Candidate

    _, _, child = family
    messages = [{"role": "system", "content": "# skills/hardware/h200/specs.md\n132 SMs"},
                {"role": "user", "content": f"Thesis: {SCRIPT}"}]
    Candidate.objects.filter(pk=child.pk).update(proposal={
        "messages": messages, "model": "kernel-coder-7b", "tokens": {"prompt": 1200, "completion": 340},
        "latency_ms": 812, "skills": ["hardware/h200/specs.md"]})
    page = as_charlie.get(reverse("candidate", args=[child.pk])).content.decode()
    assert 'data-testid="prompt"' in page
    assert "132 SMs" in page and "kernel-coder-7b" in page and "1200 prompt tokens" in page
    assert "<script>alert('src')</script>" not in page and "Thesis: &lt;/script&gt;" in page


def test_a_candidate_without_a_prompt_shows_no_prompt_section(as_charlie, family):
    _, parent, _ = family
    assert 'data-testid="prompt"' not in as_charlie.get(reverse("candidate", args=[parent.pk])).content.decode()


def _with_quartiles(report: dict) -> dict:
    """The benchmark's per-kernel distribution as the tail-aware harness reports it, around each median."""
    for entry in report["stages"]["benchmark"]["shapes"]:
        for name in ("candidate", "incumbent", "default"):
            m = entry[name]["median_us"]
            entry[name].update(min_us=m * 0.9, q1_us=m * 0.97, q3_us=m * 1.04, p99_us=m * 1.3, max_us=m * 1.6,
                               mean_us=m * 1.01)
    return report


def test_the_candidate_page_draws_each_shapes_distribution_per_kernel(as_charlie, alice):
    run = builders.make_run(alice)
    report = _with_quartiles(builders.passing_report())
    candidate = builders.evaluated(run, report)
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    page = response.content.decode()
    assert 'data-testid="distribution-chart"' in page and 'data-testid="distribution-missing"' not in page
    boxes = {t["name"]: t for t in response.context["distribution_chart"]["data"] if t["type"] == "box"}
    assert set(boxes) == {"candidate", "incumbent", "default"}
    first = report["stages"]["benchmark"]["shapes"][0]
    label = response.context["shapes"][0]["label"]
    box = boxes["candidate"]
    assert box["x"][0] == label and len(box["x"]) == len(report["stages"]["benchmark"]["shapes"])
    expected = {"lowerfence": "min_us", "q1": "q1_us", "median": "median_us", "q3": "q3_us",
                "upperfence": "max_us", "mean": "mean_us"}
    assert {key: box[key][0] for key in expected} == {key: first["candidate"][f] for key, f in expected.items()}
    tails = [t for t in response.context["distribution_chart"]["data"] if t["name"] == "incumbent p99"]
    assert tails and tails[0]["y"][0] == first["incumbent"]["p99_us"]


def test_a_report_without_quartiles_says_the_distribution_was_not_measured(as_charlie, alice):
    run = builders.make_run(alice)
    candidate = builders.evaluated(run, builders.passing_report())
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    page = response.content.decode()
    assert response.context["distribution_chart"] is None and 'id="distribution-chart"' not in page
    assert "Distribution not measured (recorded before the tail-aware benchmark)." in page
    assert 'data-testid="shape-chart"' in page  # the medians are still drawn


def test_a_shape_timed_with_a_bias_by_place_in_the_order_is_marked_and_one_without_is_not(as_charlie, alice):
    """The benchmark reports each kernel's mean by place in its set's order (docs/benchmark.md, "The place in
    the order"); a spread past selectors.PLACE_BIAS of the kernel's mean marks the shape's row."""
    run = builders.make_run(alice)
    report = builders.passing_report()
    shapes = report["stages"]["benchmark"]["shapes"]
    for i, entry in enumerate(shapes):
        for name in ("candidate", "incumbent"):
            m = entry[name]["median_us"]
            first = m * (1.3 if (i == 0 and name == "incumbent") else 1.01)   # the first shape's incumbent: +30% first
            entry[name].update(mean_us=m * 1.1, place_mean_us=[first, m, m])
    candidate = builders.evaluated(run, report)
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    rows = response.context["shapes"]
    assert rows[0]["place_biased"] and rows[0]["place_bias"] == pytest.approx(0.3 / 1.1)
    assert not any(r["place_biased"] for r in rows[1:]) and all(r["place_bias"] < 0.05 for r in rows[1:])
    assert response.content.decode().count('data-testid="place-bias"') == 1


def test_a_report_without_place_means_marks_no_shape(as_charlie, alice):
    candidate = builders.evaluated(builders.make_run(alice), builders.passing_report())
    rows = as_charlie.get(reverse("candidate", args=[candidate.pk])).context["shapes"]
    assert rows and all(r["place_bias"] is None and not r["place_biased"] for r in rows)


def test_the_per_family_table_gives_each_shapes_family_means_and_marks_a_slow_family(as_charlie, alice):
    """The benchmark's family means (report benchmark.shapes[].candidate.family_mean_us): one row per shape, one
    column per family, the candidate beside the incumbent; a family over SLOW_FAMILY_FACTOR times the shape's
    fastest is marked, as the benchmark profiles it on its own."""
    run = builders.make_run(alice)
    report = builders.passing_report()
    shapes = report["stages"]["benchmark"]["shapes"]
    for i, entry in enumerate(shapes):
        entry["candidate"]["family_mean_us"] = {"normal": 20.0, "ties": 45.0 if i == 0 else 25.0}
        entry["incumbent"]["family_mean_us"] = {"normal": 60.0, "ties": 61.0}
    candidate = builders.evaluated(run, report)
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    table = response.context["families"]
    assert table["families"] == ["normal", "ties"] and len(table["rows"]) == len(shapes)
    first = table["rows"][0]["cells"]
    assert [c["candidate"] for c in first] == [20.0, 45.0] and [c["incumbent"] for c in first] == [60.0, 61.0]
    assert [c["slow"] for c in first] == [False, True]
    assert not any(c["slow"] for r in table["rows"][1:] for c in r["cells"])
    page = response.content.decode()
    assert 'data-testid="families"' in page and page.count('data-testid="slow-family"') == 1
    assert "45.00" in page and "61.00" in page


def test_a_report_without_family_means_has_no_family_table(as_charlie, alice):
    candidate = builders.evaluated(builders.make_run(alice), builders.passing_report())
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    assert response.context["families"] is None and 'data-testid="families"' not in response.content.decode()
