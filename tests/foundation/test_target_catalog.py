"""A target's metadata is written once, in the light catalog the web side reads; each Target takes it from
its catalog entry and adds only code (docs/contract.md, What the web side may import)."""

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from gpu_worker.target_catalog import CATALOG, TargetInfo
from gpu_worker.targets import TARGETS, TargetSpec, add_rmsnorm, dsa_indexer_topk, dsa_indexer_topk_fp8

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalog_lists_exactly_the_registered_targets():
    assert sorted(CATALOG) == sorted(TARGETS)


def test_each_target_exposes_its_catalog_entry_field_for_field():
    for name, target in TARGETS.items():
        assert isinstance(target, TargetInfo), name
        for f in fields(TargetInfo):
            assert getattr(target, f.name) == getattr(CATALOG[name], f.name), (name, f.name)
        assert target.describe() == CATALOG[name].describe(), name


def test_the_checks_bound_themselves_by_the_catalog_tolerance():
    assert dsa_indexer_topk.SCORE_RTOL == CATALOG["dsa_indexer_topk"].tolerance["score_rtol"] == 1e-4
    assert dsa_indexer_topk.SUM_BANDS == CATALOG["dsa_indexer_topk"].tolerance["sum_bands"] == 4.0
    assert dsa_indexer_topk_fp8.ACC_EPS == CATALOG["dsa_indexer_topk_fp8"].tolerance["acc_eps"] == 2.0 ** -10
    assert (add_rmsnorm.Y_RTOL, add_rmsnorm.Y_ATOL) == (2.0 ** -8, 1e-5)
    assert add_rmsnorm.FAMILIES == CATALOG["add_rmsnorm"].value_families


def test_a_target_cannot_restate_its_metadata_beside_the_entry():
    """TargetSpec.of takes the metadata from the entry only: passing a field of it again is refused."""
    code = {f.name: getattr(TARGETS["dsa_topk"], f.name) for f in fields(TargetSpec)
            if f.name not in {g.name for g in fields(TargetInfo)}}
    assert TargetSpec.of(CATALOG["dsa_topk"], {}, **code) == TARGETS["dsa_topk"]
    with pytest.raises(TypeError, match="version"):
        TargetSpec.of(CATALOG["dsa_topk"], {}, version=2, **code)
    with pytest.raises(TypeError, match="check"):  # a target module without its check is refused
        TargetSpec.of(CATALOG["dsa_topk"], {k: v for k, v in code.items() if k != "check"})


def test_the_catalog_loads_with_torch_blocked():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"
            "from gpu_worker.target_catalog import CATALOG\n"
            "assert CATALOG['dsa_topk'].describe()['e2e_slot'] == 'topk'\n"
            "assert 'torch' not in [m for m, v in sys.modules.items() if v is not None]\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
