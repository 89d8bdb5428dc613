from tests.console.conftest import (  # noqa: F401  (fixtures shared with the console tests)
    as_alice,
    as_bob,
    as_charlie,
    as_dana,
    held_tasks,
    people,
)
from tests.console.test_pages_render import world  # noqa: F401  (a run, candidates, a promotion, a skill)
