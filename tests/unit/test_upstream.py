"""upstream.py (`fuzz.report.upstream`): the network it inlines is the builder's, its exit status is a repro's (1 the
recorded failure shows, 0 not, 2 anything else), each registry entry's committed draft is the current one (or one
reduced by hand that still shows its bug), and none is over 40 lines."""

import ast
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example
from fuzz.registry.drafts import RECORD, UPSTREAM, reduced_by_hand, title
from fuzz.registry.files import KNOWN_ISSUES_DIR, recorded_failure, recorded_spec
from fuzz.registry.fixes import diff_with_bases, load_fix
from fuzz.registry.issue import installed_thunder
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.report.upstream import MAX_LINES, _network, upstream_source
from fuzz.run.passes import call_on
from tests.campaign_runs import fault_everywhere
from tests.faults import injected

TANH_IN_A_CHECKPOINT = NetSpec(features=4, batch=2, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])


@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if not recorded_spec(i.id).random], ids=lambda i: i.id)
def test_the_inlined_and_specialized_network_computes_what_the_builders_does(issue):
    spec = recorded_spec(issue.id)
    imports, code = _network(spec)
    namespace: dict = {"math": math}  # (upstream_source's header imports it with os and sys)
    exec(compile(ast.Module([*imports, *code], []), "<upstream>", "exec"), namespace)
    example = build_example(spec)
    inlined = call_on(namespace["net"], namespace["x"])
    torch.testing.assert_close(inlined, call_on(example.net, example.input), rtol=0, atol=0)


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda i: i.id)
def test_each_entry_has_its_current_upstream_py_within_40_lines_and_its_recorded_exit_status(issue):
    record = json.loads((KNOWN_ISSUES_DIR / issue.id / RECORD).read_text())
    source = (KNOWN_ISSUES_DIR / issue.id / UPSTREAM).read_text()
    if reduced_by_hand(issue):
        assert source.startswith(f'"""{title(issue)}, reduced by hand. Exit 1: the recorded failure shows; 0:')
    else:
        found_on = next(iter(record["exit"]))  # written on the thunder installed then, named in its comments
        generated = upstream_source(recorded_spec(issue.id), recorded_failure(issue.id), title(issue), found_on)
        assert source == generated, "stale: python -m fuzz.registry.drafts ID"
    assert record["lines"] == len(source.splitlines()) <= MAX_LINES, "over 40 lines: reduce it by hand"
    assert "fuzz" not in {n.names[0].name.split(".")[0] for n in ast.parse(source).body if isinstance(n, ast.Import)}


@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if reduced_by_hand(i)], ids=lambda i: i.id)
def test_an_upstream_py_reduced_by_hand_still_shows_its_bug_on_the_installed_thunder(issue):
    """Nothing else checks such a file against the entry's network: it is run (4-20 s each)."""
    exits = json.loads((KNOWN_ISSUES_DIR / issue.id / RECORD).read_text())["exit"]
    if installed_thunder() not in exits:
        pytest.skip(f"no exit status recorded on thunder {installed_thunder()}: python -m fuzz.registry.drafts ID")
    ran = _run(KNOWN_ISSUES_DIR / issue.id)
    assert ran.returncode == exits[installed_thunder()] == 1, ran.stdout + ran.stderr[-2000:]


def _run(directory, env=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": "", **(env or {})}
    return subprocess.run(
        [sys.executable, UPSTREAM], cwd=directory, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda i: i.id)
def test_each_issue_md_holds_its_entrys_current_fix_diff_or_no_fix(issue):
    # a fix changed, added or withdrawn since the draft was written: `python -m fuzz.registry.drafts ID` again
    text = (KNOWN_ISSUES_DIR / issue.id / "issue.md").read_text()
    if (fix := load_fix(issue.id)) is None:
        assert "### Candidate fix" not in text
    else:
        assert "### Candidate fix" in text and diff_with_bases(fix).rstrip("\n") in text


def test_upstream_py_exits_1_where_the_failure_shows_0_where_not_and_2_when_it_cannot_run(tmp_path):
    with injected("tanh-grad-x2"):
        failure = check_spec(TANH_IN_A_CHECKPOINT).failure
    source = upstream_source(TANH_IN_A_CHECKPOINT, failure, "tanh gradient doubled", "0.2.6")
    assert len(source.splitlines()) <= 40 and "torch.testing.assert_close" in source
    (tmp_path / UPSTREAM).write_text(source)
    shows = _run(tmp_path, fault_everywhere("tanh-grad-x2"))
    assert shows.returncode == 1 and "Mismatched elements" in shows.stdout, shows.stdout + shows.stderr[-2000:]
    assert _run(tmp_path).returncode == 0
    (tmp_path / UPSTREAM).write_text(source.replace("import torch\n", "import torch\nimport no_such_module\n", 1))
    assert _run(tmp_path).returncode == 2


def test_specializing_keeps_each_default_with_its_parameter_and_never_substitutes_a_reassigned_one():
    from fuzz.report.specialize import specialized

    code = ast.parse(
        "def f(x, scale, low, offset=0, *, mode='a'):\n"
        "    scale = scale * 2\n"
        "    return x * scale + low + offset if mode == 'a' else x\n"
        "y = f(1.0, 3.0, 4.0, 0, mode='a') + f(2.0, 3.0, 5.0, 0, mode='a')\n"
    ).body
    source = ast.unparse(ast.Module(specialized(code), []))
    assert "def f(x, scale, low):" in source and "scale = scale * 2" in source, source  # offset and mode folded
    assert "return x * scale + low + 0" in source, source
    namespace: dict = {}
    exec(source, namespace)
    assert namespace["y"] == 1.0 * 6 + 4 + 2.0 * 6 + 5


def test_a_checkpointed_method_that_only_applies_one_layer_goes_unless_something_else_calls_it():
    _, code = _network(TANH_IN_A_CHECKPOINT)
    source = ast.unparse(ast.Module(code, []))
    assert "checkpoint(self.layer0, x, use_reentrant=False)" in source and "def checkpointed0" not in source
    # A random network keeps PlainNet, which calls the method itself (no checkpoint there).
    dropout = NetSpec(features=4, layers=[LayerSpec("dropout", {"p": "0.5"})], checkpoints=[CheckpointSpec(0, 1)])
    _, code = _network(dropout)
    source = ast.unparse(ast.Module(code, []))
    assert "checkpoint(self.checkpointed0, x" in source and "return self.checkpointed0(x)" in source


def test_a_training_upstream_py_draws_each_steps_batch_as_the_harness_does_and_a_plain_stack_is_sequential():
    spec = recorded_spec("dynamic-batch-output-count-crash")
    source = upstream_source(spec, recorded_failure("dynamic-batch-output-count-crash"), "t", "0.2.6")
    namespace: dict = {}
    exec(source.split("\nRECORDED = ")[0], namespace)  # the network and run(), not the check
    drawn = []
    namespace["run"](namespace["net"], lambda x: drawn.append((x, namespace["net"](x))) or drawn[-1][1])
    example = build_example(spec)
    expected = [(example.input, None), *example.training.batches]
    assert [x.shape for x, _ in drawn] == [x.shape for x, _ in expected] == [(1, 1), (2, 1)]
    for (got, _), (want, _) in zip(drawn, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert "make_batches" not in source and "\nx = " not in source  # the example's batch is drawn as step 0
    stack = NetSpec(features=3, layers=[LayerSpec("linear", {"out_features": 2, "bias": True}), LayerSpec("tanh")])
    _, code = _network(stack)
    assert "net = torch.nn.Sequential(torch.nn.Linear(3, 2, bias=True), torch.nn.Tanh())" in ast.unparse(
        ast.Module(code, [])
    )
    _, code = _network(TANH_IN_A_CHECKPOINT)  # a checkpoint is no plain stack
    assert "class Net" in ast.unparse(ast.Module(code, []))
