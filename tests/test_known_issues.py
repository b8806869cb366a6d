"""Each known issue has its shrunk spec and repro, its predicate matches that spec, and it still reproduces."""

from pathlib import Path

import pytest

from fuzz.harness import check_spec
from fuzz.known_issues import KNOWN_ISSUES, known_issues_for
from fuzz.spec import NetSpec

KNOWN = Path(__file__).resolve().parent.parent / "known_issues"


@pytest.mark.parametrize("issue", KNOWN_ISSUES, ids=lambda issue: issue.id)
def test_known_issue_has_a_matching_spec_and_a_standalone_repro(issue):
    spec = NetSpec.from_json((KNOWN / issue.id / "spec.json").read_text())
    assert issue in known_issues_for(spec)
    repro = (KNOWN / issue.id / "repro.py").read_text()
    assert "import fuzz" not in repro and "from fuzz" not in repro


@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if not i.slow], ids=lambda issue: issue.id)
def test_known_issue_still_reproduces_on_the_installed_thunder(issue):
    # When this fails, thunder fixed the bug: remove the entry (and its folder) from the registry.
    outcome = check_spec(NetSpec.from_json((KNOWN / issue.id / "spec.json").read_text()))
    assert outcome.failure is not None and outcome.failure.failure_class in issue.failure_classes
