"""The light target catalog (read by the web side) and the targets' code describe the same targets."""

from gpu_worker.target_catalog import CATALOG
from gpu_worker.targets import TARGETS


def test_the_catalog_lists_exactly_the_registered_targets():
    assert sorted(CATALOG) == sorted(TARGETS)


def test_each_catalog_entry_describes_its_target_as_the_code_does():
    for name, target in TARGETS.items():
        assert CATALOG[name].describe() == target.describe(), name
