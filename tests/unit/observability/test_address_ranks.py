"""``AddressRanks``: the most crowded address in constant time, checked against a plain
model (a scan over every address) through random adds and discards."""

from __future__ import annotations

import random

from raftlog.observability.address_ranks import AddressRanks


def test_the_most_crowded_address_gives_its_items_oldest_first() -> None:
    ranks: AddressRanks[int] = AddressRanks()
    assert ranks.most_crowded() == {}
    ranks.add("a", 1)
    ranks.add("b", 2)
    ranks.add("b", 3)
    ranks.add("b", 3)  # a repeat changes nothing
    assert list(ranks.most_crowded()) == [2, 3]
    assert len(ranks) == 2
    ranks.discard("b", 2)
    ranks.discard("b", 2)  # already gone
    ranks.discard("c", 9)  # never there
    assert list(ranks.most_crowded()) == [1]  # a reached a count of 1 first
    ranks.discard("a", 1)
    ranks.discard("b", 3)
    assert ranks.most_crowded() == {}
    assert len(ranks) == 0


def test_random_adds_and_discards_agree_with_a_scan() -> None:
    rng = random.Random(7)
    ranks: AddressRanks[int] = AddressRanks()
    model: dict[str, list[int]] = {}
    for item in range(5000):
        address = f"10.0.0.{rng.randrange(12)}"
        if rng.random() < 0.55:
            ranks.add(address, item)
            model.setdefault(address, []).append(item)
        elif model.get(address):
            gone = rng.choice(model[address])
            model[address].remove(gone)
            ranks.discard(address, gone)
        crowded = list(ranks.most_crowded())
        top = max((len(items) for items in model.values()), default=0)
        assert len(crowded) == top
        if top:
            assert any(crowded == items for items in model.values())
        assert len(ranks) == sum(1 for items in model.values() if items)
