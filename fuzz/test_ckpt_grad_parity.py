"""The property: thunderfx (with the chosen checkpoint converter) matches eager on outputs and every gradient.

The families (`fuzz.campaign.families.FAMILIES`): the general layer stacks (with the op family drawn from thunder's
OpInfos), programs (layers reading any earlier values, aliases, in-place updates, checkpointed regions of the data
flow: `fuzz.generate.program`), litgpt-style decoders around thunder's own test_checkpointing_thunderfx network
(`fuzz.generate.decoder`), the model zoo, Hugging Face transformers models with gradient checkpointing
(`fuzz.generate.zoo`), training steps of those networks (`fuzz.generate.training`), and nested checkpoints. Before
them, the op sweep runs every op call of the catalog alone in a checkpoint.
"""

import sys
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from fuzz.campaign.engine import Campaign
from fuzz.campaign.families import DECODER, GENERAL, NESTED_SLICE, PROGRAM, TRAINING, ZOO, Family
from fuzz.generate.architectures import ARCHITECTURES
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import KnownIssueChanged
from fuzz.judge.verdict import check_spec
from fuzz.registry.files import recorded_spec
from fuzz.registry.issue import KnownIssue, installed_thunder
from fuzz.registry.known_issues import KNOWN_ISSUES

if sys.version_info < (3, 11):  # Hypothesis's own dependency there
    from exceptiongroup import ExceptionGroup


def _end_if_out_of_budget(campaign: Campaign) -> None:
    # (Never Hypothesis's final replay of a failure whose shrinking the budget cut short: it writes that failure.)
    if not current_build_context().is_final and not campaign.budget.may_generate():
        # Out of budget: end this call before drawing anything. An overrun (unlike reject()) leaves
        # Hypothesis's record of what was drawn consistent, and costs microseconds, not a draw.
        current_build_context().data.mark_overrun()


def _check(spec: NetSpec, family: Family, campaign: Campaign, member: int = 0) -> None:
    if (failure := campaign.run_example(spec, family, member)) is not None:
        note(f"spec.json:\n{spec.to_json()}")
        note(f"repro.py:\n{campaign.findings.on_failure(spec, failure)}")
        raise failure.with_traceback(None)  # a remembered failure is raised again: don't grow its traceback


def _run(family: Family, part: int, data: st.DataObject | None, campaign: Campaign, **options: Any) -> None:
    """One call of ``family``'s test: its explicit example (``data`` None: on its first part only), or a network
    drawn from its strategy (``options``: `fuzz.campaign.families.DrawOptions` fields), or, where the family is
    batchable and ``--fuzz-batch K``, K networks judged in one batch where they can be and the rest one by one."""
    if data is None:
        if part == 0:
            _check(replace(family.example, device=campaign.config.device), family, campaign)
        return
    _end_if_out_of_budget(campaign)
    strategy = campaign.strategy(family, **options)
    if campaign.config.batch == 1 or not family.batchable:
        _check(data.draw(strategy, label="spec"), family, campaign)
        return
    specs = [data.draw(strategy, label=f"spec {member}") for member in range(campaign.config.batch)]
    for member, spec in enumerate(campaign.judged_in_batch(specs)):
        _check(spec, family, campaign, member=member)


# One test per family (`fuzz.campaign.families.FAMILIES`), each its own Hypothesis database key (its source), named as
# its row says; the model zoo's one per architecture (pytest's parametrization: Hypothesis keys each by its node id).
def test_op_sweep(shard: int, campaign: Campaign) -> None:
    """Every drawable op call of thunder's OpInfos alone in one checkpoint (`fuzz.generate.sweep`), before random
    composition."""
    failures = [failure for spec in campaign.sweep_cases(shard) if (failure := campaign.run_sweep_case(spec))]
    if failures:  # each already written to its own folder
        raise ExceptionGroup(f"the op sweep found {len(failures)} failing op call(s)", failures)


@given(data=st.data())
def test_ckpt_grad_parity(shard: int, data: st.DataObject, campaign: Campaign) -> None:
    """The general layer stacks (`fuzz.strategies`)."""
    _run(GENERAL, shard, data, campaign)


@given(data=st.data())
def test_program_ckpt_grad_parity(shard: int, data: st.DataObject, campaign: Campaign) -> None:
    """Programs (`fuzz.generate.program`): values read by any later layer, views and clones updated in place,
    checkpoints as regions of the data flow taking aliased inputs and returning several outputs."""
    _run(PROGRAM, shard, data, campaign)


@given(data=st.data())
def test_training_ckpt_grad_parity(shard: int, data: st.DataObject, campaign: Campaign) -> None:
    """Training steps (`fuzz.generate.training`) of the other families' networks: each step's gradients from eager's
    parameters at that step, then the parameters and optimizer state the last step leaves."""
    _run(TRAINING, shard, data, campaign)


@settings(max_examples=NESTED_SLICE.max_examples_of(settings.default.max_examples))
@given(data=st.data())
def test_nested_ckpt_grad_parity(shard: int, data: st.DataObject, campaign: Campaign) -> None:
    """Nested checkpoints, a slice of long nightly campaigns (`fuzz.campaign.families.NESTED_SLICE`)."""
    _run(NESTED_SLICE, shard, data, campaign)


@example(data=None)
@given(data=st.data())
def test_decoder_ckpt_grad_parity(shard: int, data: st.DataObject | None, campaign: Campaign) -> None:
    """litgpt-style decoders (`fuzz.generate.decoder`), thunder's own test_checkpointing_thunderfx network first."""
    _run(DECODER, shard, data, campaign)


# (max_examples read when the module is imported, after the plugin loaded the profile.)
@pytest.mark.parametrize("arch", ARCHITECTURES)
@settings(max_examples=ZOO.max_examples_of(settings.default.max_examples))
@example(data=None)
@given(data=st.data())
def test_zoo_ckpt_grad_parity(arch: str, data: st.DataObject | None, campaign: Campaign) -> None:
    """Hugging Face transformers models with gradient checkpointing (`fuzz.generate.zoo`), one test per architecture
    so that every campaign spreads over them; the seed model first."""
    if reason := ZOO.unavailable():
        pytest.skip(reason)
    _run(ZOO, 0 if arch == ZOO.example.model.arch else 1, data, campaign, architectures=(arch,))


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_known_issue_still_reproduces(issue: KnownIssue, campaign: Campaign) -> None:
    """With ``--known-issues check`` (deselected otherwise: `fuzz.campaign.hooks`): re-test the entry's registered
    spec; fails once thunder fixed it (or when it reproduces on a version its record says is fixed)."""
    spec = replace(recorded_spec(issue.id), device=campaign.config.device)
    config, end = campaign.config, campaign.budget.end
    outcome = check_spec(spec, converter=config.converter, timeout_s=config.timeout_s, deadline=end)
    if outcome.cut_short:  # (no verdict: not "fixed")
        pytest.skip(f"known issue {issue.id}: {outcome.invalid_reason}")
    verdict, as_expected = campaign.record_known_issue_check(issue, outcome)
    if not as_expected:
        raise KnownIssueChanged(
            f"known issue {issue.id} {verdict} on thunder {installed_thunder()} "
            f"({outcome.failure or 'thunderfx matches'}): record the version range with "
            f"`ckpt-fuzz bisect {issue.id} --record`"
        )
