"""Each known issue has its shrunk spec and repro, its predicate matches that spec, and it still reproduces."""

import pytest

from fuzz.harness import check_spec
from fuzz.known_issue_files import KNOWN_ISSUES_DIR, expected_repro, recorded_failure, recorded_spec
from fuzz.known_issues import KNOWN_ISSUES, known_issues_for
from fuzz.reduce import valid


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_known_issue_has_a_matching_spec_and_a_current_standalone_repro(issue):
    assert issue in known_issues_for(recorded_spec(issue.id))
    repro = (KNOWN_ISSUES_DIR / issue.id / "repro.py").read_text()
    assert "import fuzz" not in repro and "from fuzz" not in repro
    assert repro == expected_repro(issue.id), "stale repro: run `python -m fuzz.known_issue_files`"


@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if not i.slow], ids=lambda issue: issue.id)
def test_known_issue_still_reproduces_on_the_installed_thunder(issue):
    # When this fails, thunder fixed the bug: remove the entry (and its folder) from the registry.
    outcome = check_spec(recorded_spec(issue.id))
    assert issue.reproduced_by(outcome.failure)
    # The triage (checkpoint-specific or thunder-general) is re-derived from thunder, not copied.
    assert outcome.failure.triage == recorded_failure(issue.id).triage


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_taking_the_trigger_out_leaves_a_valid_network_the_issue_no_longer_matches(issue):
    # What attributing a failure to the issue rests on (fuzz.campaign.Campaign._explained).
    stripped = issue.without_trigger(recorded_spec(issue.id))
    assert issue not in known_issues_for(stripped)
    assert not stripped.layers or valid(stripped)
