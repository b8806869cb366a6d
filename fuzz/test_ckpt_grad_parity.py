"""The property: thunderfx (with the chosen checkpoint converter) matches eager on outputs and every gradient."""

from dataclasses import replace

import pytest
from hypothesis import event, given, note, reject, target
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from fuzz.campaign import Campaign
from fuzz.coverage import traits
from fuzz.harness import check_spec
from fuzz.known_issue_files import recorded_spec
from fuzz.known_issues import KNOWN_ISSUES, KnownIssue, known_issues_for
from fuzz.spec import DTYPES, NetSpec
from fuzz.strategies import net_specs


def _specs(campaign: Campaign) -> st.SearchStrategy[NetSpec]:
    config = campaign.config
    return net_specs(device=config.device, kinds=config.kinds, dtypes=config.dtypes or DTYPES)


@given(data=st.data())
def test_ckpt_grad_parity(shard: int, data: st.DataObject, campaign: Campaign) -> None:
    # `shard` only splits the campaign into several test items so xdist can spread it over workers.
    if not campaign.may_generate():
        # Out of budget: end this call before drawing anything. An overrun (unlike reject()) leaves
        # Hypothesis's record of what was drawn consistent, and costs microseconds, not a draw.
        current_build_context().data.mark_overrun()
    spec = data.draw(_specs(campaign), label="spec")
    for trait in traits(spec):
        event(trait)
    known = known_issues_for(spec)
    if known and (campaign.config.known_issues == "exclude" or any(issue.slow for issue in known)):
        event(f"skipped, known issue: {', '.join(issue.id for issue in known)}")
        reject()
    outcome = check_spec(spec, converter=campaign.config.converter, timeout_s=campaign.config.timeout_s)
    reproduced = campaign.record(outcome, known)
    if not outcome.valid:
        event(f"invalid: {outcome.invalid_reason}")
        reject()
    event("thunder compiled every checkpointed region" if outcome.compiled else "thunder fell back")
    target(outcome.discrepancy, label="largest relative error of thunderfx")
    if outcome.converters_disagree:
        event("stock and fixed converters disagree")
    if known:
        event(f"known issue {'reproduced' if reproduced else 'did not reproduce'}: {known[0].id}")
        if reproduced:
            return
    if outcome.failure is not None:
        note(f"spec.json:\n{spec.to_json()}")
        note(f"repro.py:\n{campaign.on_failure(spec, outcome.failure)}")
        raise outcome.failure


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_known_issue_still_reproduces(issue: KnownIssue, campaign: Campaign) -> None:
    """With ``--known-issues check``: re-test the entry's registered spec; fails once thunder fixed it."""
    if campaign.config.known_issues != "check":
        pytest.skip("re-tests the known-issue registry with --known-issues check")
    spec = replace(recorded_spec(issue.id), device=campaign.config.device)
    outcome = check_spec(spec, converter=campaign.config.converter, timeout_s=campaign.config.timeout_s)
    assert campaign.record_known_issue_check(issue, outcome), (
        f"known issue {issue.id} no longer reproduces ({outcome.failure or 'thunderfx matches'}): "
        "remove its entry from fuzz/known_issues.py and known_issues/"
    )
