from console import charts, diffs
from console.markdown import render_markdown


def test_markdown_drops_raw_html_and_dangerous_links():
    html = render_markdown("<script>x()</script>\n\n[a](javascript:alert(1)) ![i](x \"t\")\n\n<b onclick=x>b</b>")
    assert "<script>" not in html and 'href="javascript' not in html and "<b onclick" not in html
    assert "&lt;script&gt;" in html


def test_markdown_keeps_code_tables_and_links():
    html = render_markdown("`x < y`\n\n| a |\n|---|\n| 1 |\n\n[ok](https://example.org)")
    assert "<code>x &lt; y</code>" in html and "<table>" in html and 'href="https://example.org"' in html


def test_diffs_are_escaped_and_capped(monkeypatch):
    monkeypatch.setattr(diffs, "MAX_LINES", 10)
    text = diffs.unified_diff("a\n", "".join(f"<script>{i}</script>\n" for i in range(50)), old_name="a", new_name="b")
    html = diffs.render_diff(text)
    assert "<script>" not in html and "&lt;script&gt;" in html and "more lines not shown" in html


def test_an_empty_diff_says_so():
    assert "No differences" in diffs.render_diff("")


def test_the_best_so_far_line_only_rises_with_kept_candidates():
    series = [{"number": 1, "speedup": 1.2, "outcome": "kept", "ci_lo": 1.1, "ci_hi": 1.3, "best": 1.2},
              {"number": 2, "speedup": 1.5, "outcome": "reverted", "ci_lo": None, "ci_hi": None, "best": 1.2}]
    figure = charts.best_so_far(series)
    best = next(t for t in figure["data"] if t["name"] == "best so far")
    assert list(best["y"]) == [1.2, 1.2]


def test_a_waterfall_has_one_bar_per_version_marks_the_unmeasured_and_draws_the_ceiling():
    figure = charts.waterfall({"base": 1000.0, "ceiling": 1500.0, "weighted_by": "equal weights", "steps": [
        {"version": 1, "gain": 30.0, "level": 1030.0, "rolled_back_to": None},
        {"version": 2, "gain": None, "level": None, "rolled_back_to": None},
        {"version": 3, "gain": -30.0, "level": 1000.0, "rolled_back_to": 1}]})
    bars = figure["data"][0]
    assert list(bars["measure"]) == ["absolute", "relative", "relative", "relative"]
    assert list(bars["text"])[1:] == ["+30", "not measured", "-30"] and list(bars["y"])[2] == 0.0
    assert list(bars["x"])[3] == "v3 (rollback to v1)"
    assert figure["layout"]["shapes"][0]["y0"] == 1500.0
