"""A clock the test controls, as a pytest plugin (`-p tests.budget_clock`): each test item's share of the campaign's
budget is spent once it counted its first example, whatever the machine's load
(tests/campaign/test_campaign_result.py)."""

import math

from fuzz.campaign.budget import ItemBudget

_count = ItemBudget.count


def _count_then_spend(budget: ItemBudget, *args, **kwargs) -> None:
    _count(budget, *args, **kwargs)
    budget.deadline = -math.inf


ItemBudget.count = _count_then_spend
