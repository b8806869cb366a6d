"""Each known issue's candidate fix (fuzz.registry.fixes): it fits the installed thunder, it is undone on exit, its
diff is the edit, and its recorded checks (fix.json, `python -m fuzz.registry.fix_checks ID`) passed on this thunder;
in `make test-full`, its upstream.py shows the bug without it and not with it."""

import json
import os
import subprocess
import sys
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import replace
from itertools import permutations
from pathlib import Path

import pytest
import torch
from thunder.core import prims
from thunder.dynamo import thunderfx
from torch.utils.checkpoint import checkpoint

from fuzz.campaign.budget import ItemBudget
from fuzz.campaign.known import NOT_NARROWED, KnownBugs
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.registry.files import recorded_spec
from fuzz.registry.fix_checks import FIX_RECORD, PASSING_KEY, PassingCheck, _no_worse, _selection_passes
from fuzz.registry.fixes import (
    FIX_FILE,
    Edit,
    Fix,
    StaleFixError,
    _by_module,
    _edited,
    _source,
    applied,
    fixes_for,
    load_fix,
    with_bases,
)
from fuzz.registry.issue import KNOWN_ISSUES_DIR, installed_thunder
from fuzz.registry.known_issues import known_issues_for
from fuzz.registry.novelty import credited_fixes, fixes_on
from fuzz.report.stats import CampaignStats
from tests.campaign_runs import ROOT

FIXED = sorted(path.parent.name for path in KNOWN_ISSUES_DIR.glob(f"*/{FIX_FILE}"))


def test_docs_upstream_says_which_entries_have_a_fix_here():
    # docs/upstream.md's "candidate fix here" column is kept by hand: "yes" exactly where the entry has a fix.py.
    rows = [line.split("|") for line in (ROOT / "docs" / "upstream.md").read_text().splitlines()]
    column = {
        row[1].strip(): row[4].strip() for row in rows if len(row) > 5 and (KNOWN_ISSUES_DIR / row[1].strip()).is_dir()
    }
    assert sorted(column) == sorted(path.name for path in KNOWN_ISSUES_DIR.iterdir() if path.is_dir())
    assert sorted(entry for entry, said in column.items() if said.startswith("yes")) == FIXED


def _pow_zero_grad() -> list[float]:
    torch._dynamo.reset()  # dynamo's recompile limit per code object would run this lambda eagerly (eager is right)
    x = torch.tensor([0.0, 2.0], requires_grad=True)
    thunderfx(lambda x: torch.pow(x, 0.0).sum())(x).backward()
    return x.grad.tolist()


def test_a_fix_changes_thunder_inside_its_context_only():
    fix = load_fix("pow-zero-exponent-grad-nan")
    assert _pow_zero_grad()[0] != _pow_zero_grad()[0]  # NaN: the bug
    with applied([fix]):
        assert _pow_zero_grad() == [0.0, 0.0]
    assert _pow_zero_grad()[0] != _pow_zero_grad()[0]


def test_fixes_are_applied_module_by_module_in_import_order_so_a_new_prim_exists_before_its_executor_uses_it():
    # inplace-view-grad-dropped's fix adds a prim (thunder.core.prims) that its torch-executor edit registers: with
    # its edits listed executor first, as when another fix's edit of the executor comes first, it still applies
    fix = load_fix("inplace-view-grad-dropped")
    executor_first = replace(fix, edits=tuple(sorted(fix.edits, key=lambda e: e.module != "thunder.executors.torchex")))
    assert executor_first.edits[0].module == "thunder.executors.torchex"
    with applied([executor_first]):
        assert prims.alias_cotangent_split.name == "alias_cotangent_split"
    assert not hasattr(prims, "alias_cotangent_split")


def test_a_fix_that_no_longer_fits_is_a_one_line_error_and_changes_nothing():
    stale = Fix("stale", (Edit("thunder.core.transforms", "    dx = g_res * y * x ** (y - 3)\n", "    pass\n"),), "")
    with pytest.raises(
        StaleFixError, match=r"^thunder.core.transforms: the span the fix edits .* is not found"
    ) as error:
        with applied([load_fix("pow-zero-exponent-grad-nan"), stale]):
            pass
    assert "\n" not in str(error.value)
    assert _pow_zero_grad()[0] != _pow_zero_grad()[0]


@pytest.mark.parametrize("entry", FIXED)
def test_each_fix_is_its_diff_and_passed_its_checks_on_this_thunder(entry):
    fix = load_fix(entry)
    assert fix.why and fix.thunder_tests, f"{entry}: a fix says why, and which of thunder's tests cover it"
    diff = fix.diff()
    assert diff.startswith("--- a/thunder/") or diff.startswith("--- a/torch/"), diff[:200]
    record = json.loads((KNOWN_ISSUES_DIR / entry / FIX_RECORD).read_text())
    assert record["thunder"] == installed_thunder(), "stale record: python -m fuzz.registry.fix_checks ID"
    assert record["passes"], record
    assert record["diff_lines"] == fix.changed_lines(), (
        "the fix changed since its checks: python -m fuzz.registry.fix_checks ID"
    )
    passing = record.get(PASSING_KEY, {})
    assert passing.get("thunder") == installed_thunder() and entry in passing["with"], (
        "check 2 not run on this thunder: python -m fuzz.registry.fix_checks --passing 500 ID"
    )
    assert passing["passing"] >= 500 and passing["changed"] == {}, {k: passing[k] for k in ("passing", "changed")}
    if by_fix := passing.get("diff_lines_by_fix"):  # (records from before 2026-12-05 have the total only)
        assert by_fix[entry] == fix.changed_lines(), "the fix changed since check 2: fix_checks --passing 500 ID"


def test_every_two_fixes_of_one_module_edit_it_in_either_order():
    """A campaign applies fixes in the registry's order, a check in the order it is given: each edit's span must
    survive the other fixes' edits of its module."""
    edits = defaultdict(list)  # module -> (entry, its edits of the module)
    for fix in map(load_fix, FIXED):
        for module, module_edits in _by_module(fix.edits).items():
            edits[module].append((fix.entry, module_edits))
    for module, fixes in edits.items():
        _, text = _source(module)
        for (first, a), (second, b) in permutations(fixes, 2):
            try:
                _edited(text, [*a, *b], module)
            except StaleFixError as error:
                pytest.fail(f"{first} then {second}: {error}")


def test_check_2_catches_a_fix_that_changes_the_verdict_of_a_passing_example():
    linear = LayerSpec("linear", {"out_features": 3, "bias": True})  # a wrong input gradient of linear shows
    network = NetSpec(3, [linear, LayerSpec("tanh"), linear], [CheckpointSpec(0, 2)], batch=2)
    matmul = "    grad_a = ltorch.matmul(g.reshape(-1, g.shape[-1]), w).reshape(a.shape)\n"
    scaled = Fix("linear-grad-scaled", (Edit("thunder.core.transforms", matmul, matmul.replace("= ", "= 1.5 * ")),), "")
    check = PassingCheck([scaled], wanted=1)
    assert check.visit(network) and check.passing == 1
    (changed,) = check.changed.values()
    assert changed["verdict_with_fixes"].startswith("gradient-divergence"), changed["verdict_with_fixes"]
    fixes, _ = fixes_on(installed_thunder())
    check = PassingCheck(fixes, wanted=1)
    assert check.visit(network) and check.changed == {}


def test_a_fix_diff_names_thunder_files_as_the_wheel_does_wherever_thunder_is_installed(tmp_path):
    """thunder from a ``pip install --target`` folder on PYTHONPATH (thunder_versions; a GPU lease, where every
    campaign's re-judge under the fixes failed on a path without site-packages)."""
    import thunder

    site = tmp_path / "site"
    site.mkdir()
    (site / "thunder").symlink_to(Path(thunder.__file__).parent)
    script = "from fuzz.registry.fixes import load_fix; print(load_fix('pow-zero-exponent-grad-nan').diff()[:200])"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("--- a/thunder/core/transforms.py\n+++ b/thunder/core/transforms.py"), run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("entry", FIXED)
def test_each_fix_makes_its_upstream_py_pass(entry):
    script = str(KNOWN_ISSUES_DIR / entry / "upstream.py")
    run = lambda *fixes: subprocess.run(  # noqa: E731
        [sys.executable, *(["-m", "fuzz.registry.fixes", "script", entry] if fixes else []), script],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    stock, fixed = run(), run(entry)
    assert stock.returncode == 1, stock.stdout[-1000:] + stock.stderr[-1000:]
    assert fixed.returncode == 0, fixed.stdout[-1000:] + fixed.stderr[-2000:]
    if bases := load_fix(entry).builds_on:  # the fix is needed beyond the fixes it builds on
        only = subprocess.run(
            [sys.executable, "-m", "fuzz.registry.fixes", "script", ",".join(bases), script],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert only.returncode == 1, only.stdout[-1000:] + only.stderr[-1000:]


def _base_updated_through_a_view(x):
    y = x * 2
    y[0].mul_(3)
    return y


def _two_views_updated(x):
    y = x * 1.5
    y[0].mul_(2)
    y[:, 1].sin_()
    return y


def _read_through_an_expanded_view(x):
    y = x * 2
    e = y[:, :1].expand(3, 2)
    y[:, 0].mul_(3.0)
    return e * 1.0


def _transposed_view_updated(x):
    y = x.clone()
    t = y.t()
    t[0].relu_()
    return y * t.t()


@pytest.mark.parametrize(
    "network",
    [_base_updated_through_a_view, _two_views_updated, _read_through_an_expanded_view, _transposed_view_updated],
)
def test_with_the_view_update_fix_each_alias_that_reads_an_update_through_a_view_gets_eagers_gradient(network):
    x = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    cotangent = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def gradient(fn) -> torch.Tensor:
        leaf = x.clone().requires_grad_()
        fn(leaf).backward(cotangent)
        return leaf.grad

    expected = gradient(network)
    stock = gradient(thunderfx(network))
    with applied([load_fix("inplace-view-grad-dropped")]):
        assert torch.allclose(gradient(thunderfx(network)), expected)
    if network is _base_updated_through_a_view:  # the entry's form: thunder drops the mul_ from the gradient
        assert not torch.allclose(stock, expected)


def test_a_fix_that_builds_on_another_brings_it_wherever_it_is_applied():
    on_pow = Fix("on-pow", (), "", builds_on=("pow-zero-exponent-grad-nan",))
    again = Fix("again", (), "", builds_on=("on-pow-missing",))
    assert [fix.entry for fix in with_bases([on_pow, load_fix("pow-zero-exponent-grad-nan")])] == [
        "pow-zero-exponent-grad-nan",
        "on-pow",
    ]
    with applied([on_pow]):  # its own edits are none: what changes is its base's
        assert _pow_zero_grad() == [0.0, 0.0]
    assert _pow_zero_grad()[0] != _pow_zero_grad()[0]
    with pytest.raises(SystemExit, match=r"^no fix.py in known_issues/on-pow-missing/"):
        with_bases([again])
    empty = [fix.entry for fix in with_bases([load_fix("empty-output-loses-requires-grad")])]
    assert empty == ["expand-to-zero-size-crash", "empty-output-loses-requires-grad"]


def test_a_failure_a_fixs_base_explains_is_credited_to_the_base_not_to_the_fix_that_brought_it():
    on_clone = recorded_spec("inplace-op-on-clone-wrong-grad")  # silu's fix builds on this entry's
    assert check_spec(on_clone).failure is not None
    silu = load_fix("inplace-silu-wrong-grad")
    assert credited_fixes(on_clone, [silu], check_spec) == ("inplace-op-on-clone-wrong-grad",)


def test_a_failure_is_credited_to_the_fix_that_makes_it_pass_not_to_the_entry_it_looks_like():
    fixes, notices = fixes_on(installed_thunder())
    assert not notices and {fix.entry for fix in fixes} == set(FIXED)
    judge = lambda spec: check_spec(spec)  # noqa: E731
    # prelu of a 1-D input and a 0-dim weight: its own entry's trigger matches, yet its cause is the 0-dim operand's
    # gradient that binary-op-zero-dim-tensor-crash's fix sums.
    prelu = recorded_spec("prelu-zero-dim-weight-crash")
    assert check_spec(prelu).failure is not None
    matching = [issue.id for issue in known_issues_for(prelu)]  # tried first, as a campaign does
    assert matching == ["prelu-zero-dim-weight-crash"]
    assert credited_fixes(prelu, fixes, judge, matching) == ("binary-op-zero-dim-tensor-crash",)
    unfixed = recorded_spec("hardsigmoid-float64-grad-imprecise")  # no fix touches it: still fails, credited to none
    assert check_spec(unfixed).failure is not None
    assert credited_fixes(unfixed, fixes, judge) == ()


def test_an_entry_named_first_is_tried_alone_first_so_a_repeated_form_costs_two_runs_not_a_bisection():
    fixes, _ = fixes_on(installed_thunder())
    prelu = recorded_spec("prelu-zero-dim-weight-crash")
    runs = []
    judge = lambda spec: runs.append(spec) or check_spec(spec)  # noqa: E731
    first = ["hardsigmoid-float64-grad-imprecise", "pow-zero-exponent-grad-nan", "binary-op-zero-dim-tensor-crash"]
    assert credited_fixes(prelu, fixes, judge, first) == ("binary-op-zero-dim-tensor-crash",)
    assert len(runs) == 3  # every fix, pow's alone (still fails), the 0-dim operand's alone; no fix for the first


def test_a_campaign_process_tries_the_entry_it_credited_last_alone_first_and_while_shrinking_only_those():
    runs = []
    check = lambda spec, limit, rerun, verdict_only: runs.append(spec) or check_spec(spec)  # noqa: E731
    known = KnownBugs("fixed", ItemBudget(None, 1, None), CampaignStats(), check, lambda spec, limit: nullcontext())
    known.fixes = fixes_for(  # four fixes: a short bisection
        [
            "pow-zero-exponent-grad-nan",
            "nll-loss-unbatched-dtype-crash",
            "binary-op-zero-dim-tensor-crash",
            "max-pool1d-padding-nan",
        ]
    )
    prelu = check_spec(recorded_spec("prelu-zero-dim-weight-crash"))
    assert known.credited(prelu, []) == ("binary-op-zero-dim-tensor-crash",)  # found by bisecting every fix
    bisected = len(runs)
    assert known.recent == ["binary-op-zero-dim-tensor-crash"]
    runs.clear()
    assert known.credited(prelu, []) == ("binary-op-zero-dim-tensor-crash",)
    assert len(runs) == 2 < bisected  # every fix, then the one credited last alone
    known.budget.failures.append(prelu)  # the item shrinks a failure: a step is known or not, narrowed no further
    known.recent, runs[:] = [], []
    assert known.credited(prelu, []) == (NOT_NARROWED,) and len(runs) == 1  # every fix
    known.recent, runs[:] = ["pow-zero-exponent-grad-nan"], []
    assert known.credited(prelu, []) == (NOT_NARROWED,) and len(runs) == 2  # every fix, pow's alone
    known.recent, runs[:] = ["binary-op-zero-dim-tensor-crash"], []
    assert known.credited(prelu, []) == ("binary-op-zero-dim-tensor-crash",) and len(runs) == 2
    known.recent = []
    assert known.judge(prelu, []) and known.stats.known_by_fix[NOT_NARROWED] == 1  # known, counted as not narrowed
    assert NOT_NARROWED not in known.stats.known_issues and known.recent == []


def test_x_plus_its_mean_in_a_checkpoint_is_binary_op_zero_dim_tensor_crash_by_its_fix():
    """Issue 47's verdict on the `x + x.mean()` crash of a 1-D float32 input ("expand ... the number of sizes
    provided (1) must be greater or equal ..."): the 0-dim operand's gradient that binary-op-zero-dim-tensor-crash's
    fix sums; no entry of its own."""

    def grad() -> torch.Tensor:
        x = torch.linspace(-1.0, 1.0, 5, requires_grad=True)
        body = lambda t: t + t.mean()  # noqa: E731
        thunderfx(lambda x: checkpoint(body, x, use_reentrant=False))(x).backward(torch.ones(5))
        return x.grad

    with pytest.raises(RuntimeError, match=r"expand\(.*the number of sizes provided \(1\) must be greater or equal"):
        grad()
    with applied([load_fix("binary-op-zero-dim-tensor-crash")]):
        assert torch.allclose(grad(), torch.full((5,), 2.0))  # each x_i: 1 from itself, 5 x 1/5 through the mean


def test_an_inplace_update_in_a_nested_checkpoint_is_made_right_by_the_inplace_update_entrys_fix():
    """`y = linear(x); y += x; y.mul_(0.5)` in a checkpoint nested in a checkpoint (the nightly of 2026-12-05): with
    nested-checkpoint-crash's fix alone it runs and loses the mul_ (output 2x); inplace-update-in-checkpoint-wrong-
    grad's fix updates the nested region's body and carries its updated output out of the outer region."""
    flat = recorded_spec("inplace-update-in-checkpoint-wrong-grad")
    nested = replace(flat, checkpoints=[replace(c, nested=True) for c in flat.checkpoints])
    with applied(fixes_for(["nested-checkpoint-crash"])):
        failure = check_spec(nested).failure
    assert failure is not None and failure.failure_class == "forward-divergence"
    with applied(fixes_for(["nested-checkpoint-crash", "inplace-update-in-checkpoint-wrong-grad"])):
        assert check_spec(nested).failure is None


def test_two_fixes_of_one_function_both_apply_and_a_class_a_fix_adds_is_gone_after():
    import thunder
    import thunder.dynamo.utils

    def tanh_grad() -> float:
        x = torch.tensor([0.5], requires_grad=True)
        thunder.jit(torch.tanh)(x).backward(torch.ones(1))
        return x.grad.item()

    rule = "    a_grad = g * (1 - fwd * fwd)\n"
    put = "    put_grad(a, a_grad)\n\n    return fwd\n\n\nregister_grad(pids.TANH, _tanh_prim_grad)\n"
    doubled = Fix("doubled", (Edit("thunder.core.transforms", rule, rule.replace("g *", "2 * g *")),), "")
    tripled = Fix("tripled", (Edit("thunder.core.transforms", put, put.replace("a_grad)", "3 * a_grad)")),), "")
    stock = tanh_grad()
    with applied([doubled, tripled]):
        assert tanh_grad() == pytest.approx(6 * stock)
    assert tanh_grad() == stock
    with applied([load_fix("head-size-1-attention-autocast-stride-crash")]):  # adds class LazyInductorModule
        assert isinstance(thunder.dynamo.utils.LazyInductorModule, type)
    assert not hasattr(thunder.dynamo.utils, "LazyInductorModule")


def test_thunders_tests_may_end_with_expected_failures_or_new_tests_passing_never_with_fewer_passing():
    assert _no_worse("6 passed, 2 xpassed", "6 passed, 2 xpassed") and _no_worse("1 xfailed", "1 xpassed")
    assert not _no_worse("3 passed", "2 passed, 1 failed") and not _no_worse("2 passed", "1 passed, 1 xpassed")
    assert not _no_worse("1 passed, 1 xfailed", "1 xpassed, 1 skipped")
    # a fix that gives an op a gradient rule adds thunder's vjp test of it: it must pass, nothing else may change
    assert _no_worse("1 passed, 1 skipped, 3 warnings", "3 passed, 1 skipped, 4 warnings")
    assert not _no_worse("1 passed", "2 passed, 1 failed") and not _no_worse("1 passed, 1 skipped", "3 passed")
    assert not _no_worse("1 xpassed", "1 xfailed") and not _no_worse("2 passed", "no summary (exit 1)")
    # a selection must run a test, stock or fixed: an op's vjp test exists only once a fix gives the op a rule
    assert _selection_passes("", "1 passed") and _selection_passes("3 skipped, 10 xfailed", "3 skipped, 10 xfailed")
    assert not _selection_passes("", "") and not _selection_passes("5 skipped", "5 skipped")
    assert not _selection_passes("", "1 failed") and not _selection_passes("", "1 xfailed")


def test_a_failure_only_two_fixes_explain_together_is_credited_to_those_two_not_to_every_fix():
    pow_zero, pool = recorded_spec("pow-zero-exponent-grad-nan"), recorded_spec("max-pool1d-padding-nan")
    both = replace(pow_zero, layers=[*pow_zero.layers, *pool.layers])  # a NaN gradient from each op
    entries = (
        "max-pool1d-padding-nan",
        "mish-bfloat16-grad-inaccurate",
        "pow-zero-exponent-grad-nan",
        "softmax-bfloat16-grad-inaccurate",
    )
    fixes = [load_fix(entry) for entry in entries]  # neither half of them passes: a chain, then made minimal
    for alone in ("pow-zero-exponent-grad-nan", "max-pool1d-padding-nan"):
        with applied([load_fix(alone)]):
            assert check_spec(both).failure is not None, alone
    runs = []
    judge = lambda spec: runs.append(spec) or check_spec(spec)  # noqa: E731
    credited = credited_fixes(both, fixes, judge)
    assert credited == ("max-pool1d-padding-nan", "pow-zero-exponent-grad-nan"), credited
    # every fix; the shortest passing prefix (two runs) ends with pow's; pow's alone fails; with max-pool's first: it
    assert len(runs) == 5
    runs.clear()  # the same chain named first (as a campaign credited it last): alone each, together, nothing twice
    assert credited_fixes(both, fixes, judge, credited) == credited and len(runs) == 4
