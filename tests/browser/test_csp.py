"""The Content-Security-Policy in a real browser: an injected inline script and a foreign image are refused,
and the conftest's listener sees the refusal (so its silence on every other browser test means something)."""

import pytest

from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def test_an_injected_script_and_a_foreign_image_are_refused_and_reported(console_url, page, charlie,
                                                                         _no_csp_violations):
    login(page, console_url, "charlie")
    with page.expect_console_message(lambda message: "img-src" in message.text):  # the last of the two
        page.evaluate("""() => {
            const s = document.createElement('script'); s.textContent = 'window.arkInjected = 1';
            document.body.appendChild(s);
            const i = document.createElement('img'); i.src = 'http://evil.example/pixel.png';
            document.body.appendChild(i);
        }""")
    assert page.evaluate("() => window.arkInjected") is None
    seen = " ".join(_no_csp_violations)
    assert "inline script" in seen and "img-src" in seen, seen
    _no_csp_violations.clear()  # expected here; any other test fails on one
