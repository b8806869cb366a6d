"""What a collected test item of the campaign is: a shard of a family, of the op sweep, a model-zoo architecture's
test; and its share of the budget."""

from __future__ import annotations

import pytest

from fuzz.generate.architectures import ARCHITECTURES


def shard_of(item: pytest.Item) -> int | None:
    """The item's shard (None: not a campaign item)."""
    return getattr(item, "callspec", None) and item.callspec.params.get("shard")


def sweeps(item: pytest.Item) -> bool:
    """Whether the item is a shard of the op sweep."""
    return shard_of(item) is not None and getattr(item, "originalname", None) == "test_op_sweep"


def zoo_shard(item: pytest.Item, shards: int) -> int | None:
    """The shard that runs a model-zoo architecture's test (None: not one): the i-th architecture on shard i."""
    index = _architecture(item)
    return None if index is None else index % shards


def _architecture(item: pytest.Item) -> int | None:
    """The index of the model-zoo architecture whose test ``item`` is (None: not one)."""
    name = getattr(item, "originalname", "")
    return next((i for i, arch in enumerate(ARCHITECTURES) if name == f"test_zoo_{arch}_ckpt_grad_parity"), None)


def budget_weight(item: pytest.Item, shards: int) -> float:
    """An item's share of the budget, relative to a shard of a family: a zoo architecture's test has the share that
    spreads the family's shards over the architectures; an item that is no campaign item none."""
    if shard_of(item) is None:  # not a campaign item (a registry re-test): no share
        return 0.0
    return min(1.0, shards / len(ARCHITECTURES)) if zoo_shard(item, shards) is not None else 1.0


def in_shard_order(items: list[pytest.Item]) -> None:
    """Reorder the campaign's items, in their places among other tests, shard by shard (each family's shard 0, then
    each's shard 1, ...): what the end of the budget leaves out is then a little of every family, not the whole of the
    last ones (the zoo's architectures got nothing in a 5-minute run).

    A model-zoo architecture's test comes in round i // 2 for the i-th architecture, whatever its shard: every
    architecture is coverage of its own, where a family's later shards are more of the same; on the 8 shards' order
    the 7th (bert) started in round 6, and a 20-minute run whose findings' shrinking took the later rounds drew none.
    """
    places = [index for index, item in enumerate(items) if shard_of(item) is not None]
    for index, item in zip(places, sorted((items[i] for i in places), key=_round), strict=True):
        items[index] = item


def _round(item: pytest.Item) -> int:
    """In which round of `in_shard_order` ``item`` runs."""
    architecture = _architecture(item)
    return shard_of(item) if architecture is None else architecture // 2
