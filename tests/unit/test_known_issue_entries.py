"""Known-issue entries are data: a claim in entry.toml, triggers in a vocabulary over nodes, read by one loader."""

import re
from contextlib import nullcontext
from pathlib import Path

import pytest

from fuzz.generate.op_catalog import catalog
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.registry.issue import KNOWN_ISSUES_DIR, explained_by
from fuzz.registry.known_issues import KNOWN_ISSUES, load_entry, load_registry
from fuzz.registry.signatures import ENTRY_FILE, entry_text, read_entry, tomllib
from fuzz.registry.triggers import NODE_PREDICATES, SPEC_PREDICATES, TRIGGER_KEYS, EntryError
from tests.faults import injected

DOCS = Path(__file__).resolve().parents[2] / "docs" / "known-issues.md"

TANH_IN_CHECKPOINT = """
[issue]
description = "tanh inside a checkpoint"
classes = ["gradient-divergence"]

[[issue.trigger]]
kind = "tanh"
checkpoint = "inside"
"""


def _entry(root: Path, name: str, text: str) -> Path:
    (root / name).mkdir()
    (root / name / "entry.toml").write_text(text)
    return root / name


def test_a_new_entry_is_a_folder_with_an_entry_file_and_no_python(tmp_path):
    _entry(tmp_path, "tanh-in-checkpoint", TANH_IN_CHECKPOINT)
    (issue,) = load_registry(tmp_path)
    spec = NetSpec(features=2, layers=[LayerSpec("relu"), LayerSpec("tanh")], checkpoints=[CheckpointSpec(1, 2)])
    assert (issue.id, issue.failure_classes, issue.slow) == ("tanh-in-checkpoint", ("gradient-divergence",), False)
    assert issue.applies(spec)
    assert not issue.applies(NetSpec(features=2, layers=[LayerSpec("tanh")]))  # outside any checkpoint
    assert issue.without_trigger(spec) == NetSpec(features=2, layers=[LayerSpec("relu")])


def test_a_trigger_speaks_of_what_a_node_reads_and_what_reads_it(tmp_path):
    text = TANH_IN_CHECKPOINT.replace('checkpoint = "inside"', 'reads = { op = "exp" }\nread_by = {}')
    issue = load_entry(_entry(tmp_path, "tanh-after-exp", text))
    exp = LayerSpec("op", {"op": "exp", "args": [], "kwargs": {}})
    assert issue.applies(NetSpec(features=2, layers=[exp, LayerSpec("relu"), LayerSpec("tanh"), LayerSpec("relu")]))
    assert not issue.applies(NetSpec(features=2, layers=[exp, LayerSpec("tanh")]))  # nothing reads the tanh
    assert not issue.applies(NetSpec(features=2, layers=[LayerSpec("tanh"), exp, LayerSpec("relu")]))


def test_a_node_can_be_replaced_rather_than_deleted_and_a_network_trigger_is_undone(tmp_path):
    silu = LayerSpec("linear_silu_inplace", {"out_features": 3})
    text = TANH_IN_CHECKPOINT.replace(
        'kind = "tanh"\ncheckpoint = "inside"', 'kind = "linear_silu_inplace"\nwithout = "as-linear"'
    )
    text += '\n[[issue.trigger]]\nnetwork = "reentrant-checkpoint"\n'
    issue = load_entry(_entry(tmp_path, "silu", text))
    spec = NetSpec(features=2, layers=[silu], checkpoints=[CheckpointSpec(0, 1, use_reentrant=True)])
    stripped = issue.without_trigger(spec)
    assert stripped.layers == [LayerSpec("linear", {"out_features": 3, "bias": True})]
    assert not stripped.checkpoints[0].use_reentrant and not issue.applies(stripped)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[issue]\ndescription = 1", "needs exactly"),
        ("description = 'no table'", "no [issue] table"),
        ("[issue", "cannot read the entry"),
        (TANH_IN_CHECKPOINT.replace("gradient-divergence", "wrong-answer"), "classes must be among"),
        (TANH_IN_CHECKPOINT.replace("kind =", "layer_kind ="), "unknown trigger key 'layer_kind'"),
        (TANH_IN_CHECKPOINT.replace('"inside"', '"within"'), "checkpoint = 'within' is not one of inside, outside"),
        (TANH_IN_CHECKPOINT + 'predicate = "tanh-is-odd"', "predicate = 'tanh-is-odd' is not one of"),
        (TANH_IN_CHECKPOINT + 'reads = { opp = "exp" }', "trigger 1.reads: unknown trigger key 'opp'"),
        (TANH_IN_CHECKPOINT + '\n[[issue.trigger]]\ndtype = "bfloat16"', "trigger 2: names no node"),
        (TANH_IN_CHECKPOINT + '\n[[issue.trigger]]\nnetwork = "judged-against-eager"', "is no network trigger"),
        (TANH_IN_CHECKPOINT.replace('"inside"', '["inside"]'), "checkpoint = ['inside'] must be a name"),
        (TANH_IN_CHECKPOINT.replace('"tanh"', '"tahn"'), "kind = 'tahn' is not one of"),
        (TANH_IN_CHECKPOINT + "params = 1", "params = 1 must be a table"),
        (TANH_IN_CHECKPOINT.replace("[issue]", '[issue]\nslow = "false"'), "slow true or false"),
    ],
)
def test_a_bad_entry_is_a_one_line_error_naming_its_file_and_what_is_wrong(tmp_path, text, says):
    with pytest.raises(EntryError) as error:
        load_entry(_entry(tmp_path, "bad", text))
    assert str(tmp_path / "bad" / "entry.toml") in str(error.value) and says in str(error.value)
    assert "\n" not in str(error.value)


def test_every_key_and_named_predicate_is_documented_and_every_predicate_is_used():
    docs = DOCS.read_text()
    for name in [*TRIGGER_KEYS, *NODE_PREDICATES, *SPEC_PREDICATES]:
        assert re.search(rf"`{re.escape(name)}`", docs), f"{name} is not in {DOCS.name}"
    used = {
        name
        for issue in KNOWN_ISSUES
        for trigger in issue.triggers
        for key in ("predicate", "network")
        for name in ([trigger[key]] if isinstance(trigger.get(key), str) else trigger.get(key, []))
    }
    assert used == set(NODE_PREDICATES) | set(SPEC_PREDICATES), "a named predicate no entry uses is dead code"


def test_a_list_of_activations_is_one_of_them(tmp_path):
    text = TANH_IN_CHECKPOINT.replace('kind = "tanh"\ncheckpoint = "inside"', 'computes = ["gelu", "tanh"]')
    issue = load_entry(_entry(tmp_path, "any", text))
    assert issue.applies(NetSpec(features=2, layers=[LayerSpec("tanh")]))
    assert not issue.applies(NetSpec(features=2, layers=[LayerSpec("relu")]))


@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if not i.slow], ids=lambda issue: issue.id)
def test_recording_again_keeps_the_claim_and_replaces_the_signatures(issue):
    text = (KNOWN_ISSUES_DIR / issue.id / ENTRY_FILE).read_text()
    signatures = read_entry(KNOWN_ISSUES_DIR / issue.id)["signature"]
    how = re.search(r"^# The signature of known issue \S+: (.*)\.$", text, flags=re.M).group(1)
    assert entry_text(text, issue.id, signatures, how) == text
    headless = re.sub(r"^# The signature of known issue .*\n# Written by .*\n", "", text, flags=re.M)
    again = tomllib.loads(entry_text(headless, issue.id, signatures, how))
    assert again["signature"] == signatures and again["issue"]["description"] == issue.description


def test_of_two_entries_stripped_in_either_order_the_network_that_keeps_more_is_run():
    # gelu-after-op matches the gelu only while the ceil (zero-gradient-output-loses-requires-grad) precedes it:
    # stripping the gelu first would leave nothing to run, and the pair would explain any failure unseen.
    ceil = next(call for call in catalog().calls if call.op == "ceil" and call.form == "function")
    spec = NetSpec(features=2, layers=[LayerSpec("op", ceil.params), LayerSpec("gelu")], dtype="bfloat16")
    issues = [
        i
        for i in KNOWN_ISSUES
        if i.id in ("gelu-after-op-bfloat16-inaccurate", "zero-gradient-output-loses-requires-grad")
    ]
    assert len(issues) == 2 and all(issue.applies(spec) for issue in issues)
    ran = []
    for ordered in (issues, issues[::-1]):
        explained_by(spec, ordered, "fixed", 60.0, in_flight=lambda stripped: ran.append(stripped) or nullcontext())
    assert [[layer.kind for layer in stripped.layers] for stripped in ran] == [["gelu"], ["gelu"]]


def test_a_trigger_that_held_the_only_parameters_leaves_a_network_that_differentiates_its_input():
    # A width-1 in-place residual (its output and gradients 2x eager's) before a ReLU, the input without grad (an
    # admitted reproduction): without the trigger only the ReLU is left, which has nothing to differentiate unless
    # the input requires grad; then it passes, and the entry explains the failure.
    issue = next(i for i in KNOWN_ISSUES if i.id == "inplace-update-in-checkpoint-wrong-grad")
    spec = NetSpec(
        features=1,
        layers=[LayerSpec("inplace_residual"), LayerSpec("relu")],
        checkpoints=[CheckpointSpec(0, 1)],
        batch=1,
        input_requires_grad=False,
    )
    ran = []
    assert explained_by(spec, [issue], "fixed", 60.0, in_flight=lambda stripped: ran.append(stripped) or nullcontext())
    (stripped,) = ran
    assert [layer.kind for layer in stripped.layers] == ["relu"] and stripped.input_requires_grad


def test_an_update_that_was_the_outputs_only_path_to_grad_is_explained_once_the_input_is_returned_too():
    # Seen in the autocast self-test's runs: s.add_(x) into an input needing no grad (input-update-loses-requires-grad),
    # its result the only output. Without the update nothing needs grad, so the stripped network returns x too (as
    # the strategies make such a program) and passes: the entry explains it; before, it was reported as new.
    issue = next(i for i in KNOWN_ISSUES if i.id == "input-update-loses-requires-grad")
    state = {"width": 1, "requires_grad": False}
    spec = NetSpec(
        features=1,
        layers=[LayerSpec("state_input", state, reads=[0]), LayerSpec("add_", reads=[1, 0])],
        batch=1,
        outputs=[2],
    )
    assert issue.applies(spec) and check_spec(spec).failure is not None
    ran = []
    assert explained_by(spec, [issue], "fixed", 60.0, in_flight=lambda stripped: ran.append(stripped) or nullcontext())
    (stripped,) = ran
    assert [layer.kind for layer in stripped.layers] == ["state_input"] and stripped.outputs[-1] == 0


def test_a_known_crash_that_hides_another_known_bug_is_explained_by_both_and_nothing_else():
    # Seen in a nightly: mul of a (4, 4) tensor by a 0-dim one (binary-op-zero-dim-tensor-crash) before a width-4
    # in-place residual in a checkpoint (inplace-update-in-checkpoint-wrong-grad, hidden by the crash). Stripping the
    # crash's trigger alone leaves the residual's 2x gradients: both entries explain the failure, down to a network
    # that passes; a third bug beside them (tanh's gradient doubled in thunder) is not explained away.
    mul = next(
        call
        for call in catalog().calls
        if call.op == "mul" and call.form == "function" and [a["tensor"] for a in call.args] == [[4, 4], []]
    )
    crash, inplace = (
        next(i for i in KNOWN_ISSUES if i.id == name)
        for name in ("binary-op-zero-dim-tensor-crash", "inplace-update-in-checkpoint-wrong-grad")
    )
    layers = [LayerSpec("op", mul.params), LayerSpec("inplace_residual")]
    spec = NetSpec(features=4, layers=layers, checkpoints=[CheckpointSpec(1, 2)], batch=3)
    assert crash.applies(spec) and inplace.applies(spec)
    assert not explained_by(spec, [crash], "fixed", 60.0)
    assert explained_by(spec, [crash], "fixed", 60.0, others=[inplace])
    with injected("tanh-grad-x2"):  # (a fault that fires inside checkpoints only: tests/faults.py)
        third = NetSpec(features=4, layers=[*layers, LayerSpec("tanh")], checkpoints=[CheckpointSpec(1, 3)], batch=3)
        assert not explained_by(third, [crash], "fixed", 60.0, others=[inplace])


def test_every_entry_records_its_upstream_search_and_the_readme_lists_those_not_reported():
    """The `[upstream]` table (matches, related, the date searched) of each entry.toml; the README's "not yet
    reported upstream" list is exactly the entries that match nothing upstream."""
    tables = {issue.id: read_entry(KNOWN_ISSUES_DIR / issue.id)["upstream"] for issue in KNOWN_ISSUES}
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", t["searched"]) and "related" in t for t in tables.values())
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    listed = re.search(r"\*\*Not yet reported\s+upstream\*\*[^:]*:([^.]*)\.", readme).group(1)
    assert sorted(i.strip() for i in listed.split(",")) == sorted(i for i, t in tables.items() if not t["matches"])
