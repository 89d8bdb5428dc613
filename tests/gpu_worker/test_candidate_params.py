"""gpu_worker/candidate_params.py: a variant is the candidate's source with its PARAMS literal rewritten."""
from pathlib import Path

import pytest

from gpu_worker.candidate_params import read_space, rewrite_params, set_params

ROOT = Path(__file__).resolve().parents[2]
BEST = (ROOT / "gpu_worker/candidates/dsa_topk/best.py").read_text()


def _without_params(source: str) -> str:
    return source.replace(source[source.index("PARAMS = "):source.index("SPACE = ")], "")


def test_set_params_changes_only_the_named_entries_of_the_params_literal():
    source, changed = set_params(BEST, ["VLIN=1", "RGRID = 128", "KTH=0", "TIE_WHOLE=2e2"])
    params, space = read_space(source)
    assert changed == {"VLIN": 1, "RGRID": 128, "KTH": 0, "TIE_WHOLE": 200.0}
    assert params == {**read_space(BEST)[0], **changed} and space == read_space(BEST)[1]
    assert _without_params(source) == _without_params(BEST)         # nothing else in the file changed


@pytest.mark.parametrize("bad,match", [("VLINN=1", "no such parameter"), ("VLIN", "expected NAME=VALUE"),
                                       ("=1", "expected NAME=VALUE")])
def test_set_params_refuses_what_is_not_an_assignment_to_a_known_name(bad, match):
    with pytest.raises(ValueError, match=match):
        set_params(BEST, [bad])


def test_a_bare_word_is_a_string_and_a_source_without_params_gets_one_after_its_imports():
    source = "import torch\n\nSPACE = {'MODE': ['a', 'b']}\n"
    out, changed = set_params(source, ["MODE=b"])
    assert changed == {"MODE": "b"} and read_space(out) == ({"MODE": "b"}, {"MODE": ["a", "b"]})
    assert out.index("import torch") < out.index("PARAMS = ") < out.index("SPACE = ")
    assert rewrite_params(out, {"MODE": "a"}).count("PARAMS = ") == 1
