"""tests/conftest.py's own promise that matters to CI: an async test's loop closes even when a task the test
left loses its cancellation (without _async_test_ends_its_tasks, this test's teardown waits forever)."""

import asyncio

import pytest


@pytest.mark.timeout(60)
async def test_a_task_that_loses_its_first_cancellation_still_ends_with_its_test():
    ended = asyncio.Event()

    async def loses_one_cancellation():
        lost = False
        try:
            while True:
                try:
                    await asyncio.sleep(0.2)
                except asyncio.CancelledError:
                    if lost:
                        raise
                    lost = True
        finally:
            ended.set()

    asyncio.get_running_loop().create_task(loses_one_cancellation())
    await asyncio.sleep(0.05)
    assert not ended.is_set()
