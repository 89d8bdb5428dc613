"""The README's promise, in a real browser: log in, ping the GPU workers, see the answer arrive live."""

import pytest

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.browser


def test_a_user_logs_in_pings_the_gpu_worker_and_sees_the_answer_without_reloading(
        page, console_url, bob, loop_worker, gpu_worker, gpu_hardware):
    login(page, console_url, "bob")  # a ping needs the reviewer role (docs/security.md)
    workers = page.locator('[data-testid="workers"]')
    workers.get_by_text(gpu_hardware).wait_for(timeout=60_000)  # registered by its heartbeat: pingable
    page.fill("input[name=hardware]", gpu_hardware)
    page.click('[data-testid="ping"]')
    pong = page.wait_for_selector("#pings .pong", timeout=60_000)
    assert "cpu" in pong.inner_text()
    screenshot(page, "wiring")
