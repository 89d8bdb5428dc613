"""Where the time goes, as people and proposers read it: the candidate page's table, kernel chart and e2e
ceiling, and the LLM prompt's section from the incumbent's latest report."""

import pytest
from django.test import Client
from django.urls import reverse

from gpu_worker.pipeline import profile
from loop import where_time
from loop.models import Evaluation, Run
from loop.proposers import llm
from tests.console import builders
from tests.gpu_worker.test_profile import canned_trace
from tests.loop import reports

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_charlie(charlie):
    client = Client()
    client.force_login(charlie)
    return client


def profiled_report(with_profile=True, slow_family=False):
    shapes = [reports.shape_result(4, 32768, 0.8), reports.shape_result(64, 131072, 0.85)]
    for s in shapes:
        s.update(floor_us=12.0, bound="memory", bytes_fraction=0.15, flops_fraction=0.01)
        if with_profile:
            s["profile"] = dict(profile.aggregate(canned_trace(), replays=2), family="normal")
    if slow_family:   # the second shape's ties inputs, profiled on their own (bench_child._profile)
        slow = profile.aggregate(canned_trace(), replays=2)
        slow["kernels"][0] = dict(slow["kernels"][0], name="_r_hist", us=88.5)
        shapes[1]["profile"]["slowest_family"] = dict(slow, family="ties", mean_us=140.0, first_set=1)
    point = dict(reports.e2e_point(32, 131072, ratio=1.149), ceiling_tok_s=1220.0, ceiling_ratio=1.22,
                 ceiling_ratio_ci95=[1.21, 1.23], ceiling_attained=1149 / 1220, gain_attained=149 / 220)
    return reports.report(shapes=shapes, points=[reports.e2e_point(1, 8192), point])


def test_the_candidate_page_shows_the_profile_the_floor_and_the_ceiling(as_charlie, alice):
    run = builders.make_run(alice)
    candidate = builders.evaluated(run, profiled_report())
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    page = response.content.decode()
    assert 'data-testid="time-profile"' in page and "_topk_histogram_kernel" in page
    assert "attained 94% of a possible 1.22x (68% of the possible gain)" in page
    names = [t["name"] for t in response.context["kernel_chart"]["data"]]
    assert names == ["_topk_histogram_kernel", "_topk_select_kernel", "Memset (Device)", "floor"]
    assert response.context["kernel_chart"]["data"][0]["y"] == [9.5, 9.5]
    assert len(response.context["ceilings"]) == 1  # the point without a ceiling is not made one


def test_a_much_slower_value_family_shows_where_its_own_time_goes(as_charlie, alice):
    run = builders.make_run(alice)
    candidate = builders.evaluated(run, profiled_report(slow_family=True))
    response = as_charlie.get(reverse("candidate", args=[candidate.pk]))
    page = response.content.decode()
    assert page.count('data-testid="slow-family"') == 1 and "<strong>ties</strong> values, the slowest" in page
    assert "_r_hist" in page and "(normal values)" in page
    labels = response.context["kernel_chart"]["data"][0]["x"]
    # the ties bar sits beside its own shape's (the label's key order is the stored report's: jsonb sorts keys)
    assert len(labels) == 3 and labels[2] == labels[1] + " (ties)" and "n_ctx=131072" in labels[1]
    section = where_time.prompt_section(profiled_report(slow_family=True))
    assert "on ties values (mean 140.0 us, the slowest family): _r_hist 88.5 us x1" in section
    assert "ties values" not in where_time.prompt_section(profiled_report())


def test_a_report_without_a_profile_says_so_and_an_old_report_shows_no_section(as_charlie, alice):
    run = builders.make_run(alice)
    bare = builders.evaluated(run, profiled_report(with_profile=False), tag="bare")
    page = as_charlie.get(reverse("candidate", args=[bare.pk])).content.decode()
    assert 'data-testid="profile-missing"' in page and "0.15" in page
    old = builders.evaluated(run, builders.passing_report(), tag="old")  # an ark.report/1: nothing measured
    page = as_charlie.get(reverse("candidate", args=[old.pk])).content.decode()
    assert 'data-testid="where-time"' not in page and 'data-testid="e2e-ceiling"' not in page


def test_the_prompt_starts_from_the_incumbents_bottleneck(alice):
    run = builders.make_run(alice)
    messages, _ = llm.build_messages(run)
    assert "Where the incumbent's time goes" not in messages[1]["content"]  # the default kernel: no report
    incumbent = builders.evaluated(run, profiled_report(), tag="inc")
    Run.objects.filter(pk=run.pk).update(incumbent=incumbent)
    messages, _ = llm.build_messages(Run.objects.get(pk=run.pk))
    user = messages[1]["content"]
    section = user.split("## Where the incumbent's time goes")[1].split("## Forbidden")[0]
    assert "rows=4, n_ctx=32768" in section and "12.0 us" in section
    assert "_topk_histogram_kernel 9.5 us x1" in section and "bytes 15% of peak" in section
    assert "e2e batch 32, context 131072: attained 94% of a possible 1.22x" in section
    assert Evaluation.objects.filter(candidate=incumbent).count() == 1


def test_prompt_section_is_none_without_measurements():
    assert where_time.prompt_section(None) is None
    assert where_time.prompt_section(reports.cpu_report()) is None


def test_nsight_compute_counters_show_on_the_page_and_in_the_prompt(as_charlie, alice):
    from gpu_worker.pipeline import ncu
    from tests.gpu_worker.test_ncu import RAW

    report = profiled_report()
    shape = report["stages"]["benchmark"]["shapes"][1]
    shape["profile"]["ncu"] = {"shape": shape["shape"], "kernels": ncu.summarize(ncu.parse(RAW)), "seconds": 9.0}
    run = builders.make_run(alice)
    page = as_charlie.get(reverse("candidate", args=[builders.evaluated(run, report).pk])).content.decode()
    assert 'data-testid="ncu-counters"' in page and "<code>_kb_filter</code>" in page
    assert "<td>2.14</td>" in page      # _kb_filter's DRAM megabytes (2,135,040 bytes read)
    section = where_time.prompt_section(report)
    assert "- Nsight Compute at " in section and "_r_hist x4 13.0 us, DRAM 0% of peak" in section
    failed = profiled_report()
    failed["stages"]["benchmark"]["shapes"][0]["profile"]["ncu"] = {"shape": {}, "kernels": [],
                                                                    "error": "no kernel was profiled: ERR_NVGPUCTRPERM"}
    page = as_charlie.get(reverse("candidate", args=[builders.evaluated(run, failed, tag="f").pk])).content.decode()
    assert 'data-testid="ncu-error"' in page and "ERR_NVGPUCTRPERM" in page
    assert "Nsight Compute" not in where_time.prompt_section(failed)
