"""A card reports how its headline metric moves with the seed, and its summary cannot contradict its runs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import vaezoo
from vaezoo.cards import Card, SeedSpread
from vaezoo.evaluate import as_metrics

RUNS = [{"seed": 0, "value": 0.75}, {"seed": 1, "value": 0.9}, {"seed": 2, "value": 0.8}]


def spread(**changes):
    fields = {"runs": RUNS, "n": 3, "median": 0.8, "min": 0.75, "max": 0.9, "shipped": 1,
              "selection": "the best run", "command": "vaezoo train CARD --seed N"}
    return SeedSpread.model_validate({**fields, **changes})


def test_a_summary_that_matches_its_runs_is_accepted():
    assert spread().median == 0.8


@pytest.mark.parametrize("changes, message", [
    ({"median": 0.85}, "median is 0.85 but the runs give 0.8"),
    ({"n": 4}, "n is 4 but the runs give 3"),
    ({"max": 0.95}, "max is 0.95 but the runs give 0.9"),
    ({"shipped": 7}, "shipped seed 7 is not one of the runs"),
    ({"runs": [], "n": 0}, "at least 1 item"),
])
def test_a_summary_contradicting_its_runs_is_refused(changes, message):
    with pytest.raises(ValidationError, match=message):
        spread(**changes)


def test_jointvae_mnist_reports_its_seeds_and_ships_one_of_them():
    card = vaezoo.get_card("jointvae-mnist")
    seeds = card.metrics["cluster_accuracy"].seeds
    assert seeds.n == len(seeds.runs) >= 6
    shipped = {run.seed: run.value for run in seeds.runs}[seeds.shipped]
    assert shipped == card.metrics["cluster_accuracy"].value


def test_eval_write_keeps_the_spread_over_seeds():
    card = vaezoo.get_card("jointvae-mnist")
    written = as_metrics(card, {"cluster_accuracy": 0.9581, "reconstruction": 1.0})
    assert written["cluster_accuracy"].seeds == card.metrics["cluster_accuracy"].seeds
    assert isinstance(Card.model_validate(card.model_dump()), Card)
