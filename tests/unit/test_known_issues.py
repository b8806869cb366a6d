"""Each known issue has its shrunk spec and repro, its predicate matches that spec, and it still reproduces."""

import pytest

from fuzz.generate.reduce import valid
from fuzz.judge.verdict import check_spec
from fuzz.registry.files import expected_repro, recorded_failure, recorded_spec
from fuzz.registry.issue import installed_thunder, with_a_backward
from fuzz.registry.known_issues import KNOWN_ISSUES, known_issues_for


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_known_issue_has_a_matching_spec_and_a_generated_standalone_repro(issue):
    assert issue.applies(recorded_spec(issue.id))
    repro = expected_repro(issue.id)  # generated on demand, not committed
    assert "import fuzz" not in repro and "from fuzz" not in repro
    compile(repro, f"{issue.id}/repro.py", "exec")


@pytest.mark.slow
@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if not i.slow], ids=lambda issue: issue.id)
def test_known_issue_is_as_its_version_record_expects_on_the_installed_thunder(issue):
    # When this fails, thunder fixed the bug (or it came back after its recorded fix): record the version range
    # with `ckpt-fuzz bisect ID --record`.
    outcome = check_spec(recorded_spec(issue.id))
    verdict, as_expected = issue.status(issue.reproduced_by(outcome.failure, outcome.spec), installed_thunder())
    assert as_expected, verdict
    if outcome.failure is not None:  # the triage (checkpoint-specific or thunder-general) is re-derived, not copied
        assert outcome.failure.triage == recorded_failure(issue.id).triage


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_taking_the_trigger_out_leaves_a_valid_network_the_issue_no_longer_matches(issue):
    # What attributing a failure to the issue rests on (fuzz.campaign.known.KnownBugs.explained).
    stripped = issue.without_trigger(recorded_spec(issue.id))
    assert issue not in known_issues_for(stripped)
    assert not stripped.layers or valid(with_a_backward(stripped))
