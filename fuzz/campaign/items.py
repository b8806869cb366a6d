"""What a collected test item of the campaign is: a part (shard, or model-zoo architecture) of a family of
`fuzz.campaign.families.FAMILIES`; whether the campaign runs it, in which order, and its share of the budget."""

from __future__ import annotations

import pytest

from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.families import BY_TEST, SWEEP, TEST_MODULE, Family
from fuzz.generate.architectures import ARCHITECTURES


def family_of(item: pytest.Item) -> Family | None:
    """The family whose test ``item`` is (None: not a campaign item, or a test of another module of that name)."""
    module = getattr(getattr(item, "module", None), "__name__", "")
    return BY_TEST.get(getattr(item, "originalname", None)) if module.endswith(TEST_MODULE) else None


def item_name(item: pytest.Item) -> str:
    """The campaign item's name, whatever the shard: its family's, a model-zoo architecture's ``zoo[<arch>]``."""
    family = family_of(item)
    return f"{family.name}[{item.callspec.params['arch']}]" if family.parts == "architectures" else family.name


def part_of(item: pytest.Item) -> int | None:
    """The item's part of its family: its shard, or its model-zoo architecture's index (None: not a campaign item)."""
    if (family := family_of(item)) is None:
        return None
    params = item.callspec.params
    return list(ARCHITECTURES).index(params["arch"]) if family.parts == "architectures" else params["shard"]


def sweeps(item: pytest.Item) -> bool:
    """Whether the item is a shard of the op sweep."""
    return family_of(item) is SWEEP


def left_out(item: pytest.Item, config: CampaignConfig) -> bool:
    """Whether the campaign leaves the campaign item ``item`` out: its family not among ``--fuzz-families``, not run
    in the campaign's profile or under its budget, or a part past its family's first where it has one."""
    family = family_of(item)
    return family is not None and (
        config.families is not None and family.name not in config.families
        or not family.runs_in(config.profile, config.minutes)
        or family.parts == "one" and part_of(item) != 0
    )  # fmt: skip


def budget_weight(item: pytest.Item, shards: int) -> float:
    """An item's share of the budget, relative to a shard of the general family: its family's weight, spread over the
    architectures where they outnumber the shards; an item that is no campaign item none."""
    if (family := family_of(item)) is None:  # not a campaign item (a registry re-test): no share
        return 0.0
    return family.weight * (min(1.0, shards / len(ARCHITECTURES)) if family.parts == "architectures" else 1.0)


def in_shard_order(items: list[pytest.Item]) -> None:
    """Reorder the campaign's items, in their places among other tests, shard by shard (each family's shard 0, then
    each's shard 1, ...): what the end of the budget leaves out is then a little of every family, not the whole of the
    last ones (the zoo's architectures got nothing in a 5-minute run).

    A model-zoo architecture's test comes in round i // 2 for the i-th architecture: every architecture is coverage
    of its own, where a family's later shards are more of the same; on the 8 shards' order the 7th (bert) started in
    round 6, and a 20-minute run whose findings' shrinking took the later rounds drew none.
    """
    places = [index for index, item in enumerate(items) if part_of(item) is not None]
    for index, item in zip(places, sorted((items[i] for i in places), key=_round), strict=True):
        items[index] = item


def _round(item: pytest.Item) -> int:
    """In which round of `in_shard_order` ``item`` runs."""
    part = part_of(item)
    return part // 2 if family_of(item).parts == "architectures" else part
