from pathlib import Path

import pytest

from loop import skillfiles
from loop.skillfiles import SkillFile, export_tree, load_tree, parse, render_context, select

SKILLS_ROOT = Path(__file__).resolve().parents[2] / "skills"
HARDWARE_KEYS = {"h200", "h100", "b200", "rtx-pcie"}
MODEL_KEYS = {"deepseek-v3.2", "deepseek-v4-flash", "llama-dense"}
TARGET_KEYS = {"dsa_topk", "dsa_indexer_topk", "dsa_indexer_topk_fp8", "add_rmsnorm", "allreduce"}
KNOWN = {"hardware": HARDWARE_KEYS, "models": MODEL_KEYS, "targets": TARGET_KEYS}

VALID_FRONT = (
    "---\n"
    "title: A skill\n"
    "kind: hardware\n"
    "applies_to:\n"
    "  hardware: [h200]\n"
    "  models: [any]\n"
    "  targets: [any]\n"
    "sources: [a datasheet]\n"
    "---\n"
)


def make(key: str, *, kind: str, hardware="[any]", models="[any]", targets="[any]") -> SkillFile:
    text = (
        f"---\ntitle: {key}\nkind: {kind}\napplies_to:\n  hardware: {hardware}\n"
        f"  models: {models}\n  targets: {targets}\nsources: [test]\n---\nbody of {key}\n"
    )
    return parse(key, text)


@pytest.fixture(scope="module")
def shipped() -> list[SkillFile]:
    return load_tree(SKILLS_ROOT)


def test_the_shipped_tree_has_between_ten_and_sixteen_skills(shipped):
    assert 10 <= len(shipped) <= 16
    assert [skill.key for skill in shipped] == sorted(skill.key for skill in shipped)


def test_every_shipped_skill_parses_and_declares_what_it_applies_to(shipped):
    for skill in shipped:
        meta = skill.meta
        assert meta["title"].strip(), skill.key
        assert meta["sources"], skill.key
        top_folder = skill.key.split("/")[0]
        expected_kind = {"hardware": "hardware", "models": "model", "rules": "rules"}[top_folder]
        assert meta["kind"] == expected_kind, skill.key
        for axis, known in KNOWN.items():
            declared = meta["applies_to"][axis]
            assert set(declared) <= known | {"any"}, (skill.key, axis, declared)
        if meta["kind"] == "hardware":
            assert skill.key.split("/")[1] in meta["applies_to"]["hardware"], skill.key
        if meta["kind"] == "model":
            assert skill.key.split("/")[1] in meta["applies_to"]["models"], skill.key
        assert skill.body.strip(), skill.key


def test_every_hardware_and_model_key_has_at_least_one_skill(shipped):
    hardware = {h for s in shipped if s.kind == "hardware" for h in s.meta["applies_to"]["hardware"]}
    models = {m for s in shipped if s.kind == "model" for m in s.meta["applies_to"]["models"]}
    assert HARDWARE_KEYS <= hardware
    assert MODEL_KEYS <= models


def test_the_h200_deepseek_v32_dsa_topk_context_has_h200_model_and_rules_but_not_b200(shipped):
    chosen = select(shipped, hardware="h200", model="deepseek-v3.2", target="dsa_topk")
    keys = [skill.key for skill in chosen]

    assert "rules/forbidden-shortcuts.md" in keys
    assert "rules/done.md" in keys
    assert any(key.startswith("hardware/h200/") for key in keys)
    assert "models/deepseek-v3.2/dsa-indexer-topk.md" in keys
    assert "models/deepseek-v3.2/architecture.md" in keys
    assert not any(key.startswith("hardware/b200/") for key in keys)
    assert not any(key.startswith("hardware/rtx-pcie/") for key in keys)
    assert not any(key.startswith("models/deepseek-v4-flash/") for key in keys)
    assert "models/llama-dense/add-rmsnorm.md" not in keys

    context = render_context(chosen)
    for key in keys:
        assert f"skills/{key}" in context
    assert "b200" not in " ".join(keys)
    assert "---\ntitle:" not in context


def test_select_puts_rules_first_then_hardware_then_model_then_target_specific():
    skills = [
        make("models/m/target.md", kind="model", models="[m]", targets="[t]"),
        make("models/m/arch.md", kind="model", models="[m]"),
        make("hardware/h200/a.md", kind="hardware", hardware="[h200]"),
        make("rules/z.md", kind="rules", hardware="[h200]"),
        make("hardware/b200/a.md", kind="hardware", hardware="[b200]"),
    ]

    chosen = select(skills, hardware="h200", model="m", target="t")

    assert [s.key for s in chosen] == [
        "rules/z.md",
        "hardware/h200/a.md",
        "models/m/arch.md",
        "models/m/target.md",
    ]


def test_rules_apply_whatever_they_declare_and_any_matches_everything():
    rules = make("rules/r.md", kind="rules", hardware="[b200]", models="[x]", targets="[y]")
    generic = make("hardware/h200/g.md", kind="hardware", hardware="[any]")

    assert skillfiles.applies(rules.meta, hardware="h200", model="m", target="t")
    assert skillfiles.applies(generic.meta, hardware="rtx-pcie", model=None, target=None)


def test_a_target_specific_skill_is_left_out_for_other_targets_and_when_no_target_is_given():
    specific = make("models/m/t.md", kind="model", models="[m]", targets="[dsa_topk]")

    assert skillfiles.applies(specific.meta, hardware="h200", model="m", target="dsa_topk")
    assert not skillfiles.applies(specific.meta, hardware="h200", model="m", target="allreduce")
    assert not skillfiles.applies(specific.meta, hardware="h200", model="m", target=None)


def test_export_of_the_loaded_tree_reproduces_every_file_byte_for_byte(shipped, tmp_path):
    written = export_tree(((skill.key, skill.text) for skill in shipped), tmp_path)

    assert len(written) == len(shipped)
    for skill in shipped:
        assert (tmp_path / skill.key).read_bytes() == (SKILLS_ROOT / skill.key).read_bytes()


def test_export_keeps_crlf_line_endings_and_non_ascii_text(tmp_path):
    text = VALID_FRONT.replace("\n", "\r\n") + "Tensor memory: 256 KB \u2014 per SM\r\n"
    (tmp_path / "src" / "hardware" / "h200").mkdir(parents=True)
    (tmp_path / "src" / "hardware" / "h200" / "x.md").write_bytes(text.encode("utf-8"))

    [skill] = load_tree(tmp_path / "src")
    export_tree([(skill.key, skill.text)], tmp_path / "out")

    assert skill.meta["title"] == "A skill"
    assert (tmp_path / "out" / "hardware" / "h200" / "x.md").read_bytes() == text.encode("utf-8")


@pytest.mark.parametrize(
    "key",
    [
        "../escape.md",
        "hardware/../../escape.md",
        "/etc/passwd",
        "hardware//x.md",
        "a\\..\\b.md",
        "",
        "C:/x.md",
    ],
)
def test_export_refuses_a_key_that_could_escape_the_root_and_writes_nothing(tmp_path, key):
    root = tmp_path / "root"

    with pytest.raises(ValueError):
        export_tree([("rules/ok.md", VALID_FRONT), (key, VALID_FRONT)], root)

    assert not root.exists() or not any(root.rglob("*"))
    assert not (tmp_path / "escape.md").exists()


def test_export_refuses_a_symlinked_folder_that_points_outside_the_root(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "hardware").symlink_to(outside, target_is_directory=True)

    with pytest.raises(ValueError):
        export_tree([("hardware/x.md", VALID_FRONT)], root)

    assert not (outside / "x.md").exists()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("# no front matter\n", "missing front matter"),
        ("---\ntitle: x\n", "not closed"),
        ("---\ntitle: [unclosed\n---\nbody\n", "not valid YAML"),
        ("---\n- a list\n---\nbody\n", "mapping"),
        (VALID_FRONT.replace("title: A skill\n", ""), "title"),
        (VALID_FRONT.replace("kind: hardware", "kind: gpu"), "kind"),
        (VALID_FRONT.replace("  models: [any]\n", ""), "applies_to' is missing 'models'"),
        (VALID_FRONT.replace("  hardware: [h200]", "  hardware: h200"), "applies_to.hardware"),
        (VALID_FRONT.replace("  targets: [any]", "  targets: []"), "applies_to.targets"),
        (VALID_FRONT.replace("  targets: [any]", "  targets: [any]\n  gpus: [x]"), "unknown axes"),
        (
            VALID_FRONT.replace(
                "applies_to:\n  hardware: [h200]\n  models: [any]\n  targets: [any]\n",
                "applies_to: everything\n",
            ),
            "applies_to",
        ),
        (VALID_FRONT.replace("sources: [a datasheet]\n", ""), "sources"),
    ],
)
def test_malformed_front_matter_raises_an_error_that_names_the_file(text, fragment):
    with pytest.raises(ValueError) as error:
        parse("hardware/h200/broken.md", text)

    assert "hardware/h200/broken.md" in str(error.value)
    assert fragment in str(error.value)


def test_load_tree_names_the_broken_file(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "good.md").write_text(VALID_FRONT + "body\n")
    (tmp_path / "rules" / "bad.md").write_text("no front matter\n")

    with pytest.raises(ValueError, match="rules/bad.md"):
        load_tree(tmp_path)


def test_parse_keeps_the_whole_text_and_the_body_after_the_front_matter():
    text = VALID_FRONT + "## Heading\n\n---\n\nA rule inside the body.\n"

    skill = parse("hardware/h200/x.md", text)

    assert skill.text == text
    assert skill.body == "## Heading\n\n---\n\nA rule inside the body.\n"
    assert skill.meta["applies_to"]["hardware"] == ["h200"]
