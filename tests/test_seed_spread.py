"""A card reports how its headline metric moves with the seed, and its summary cannot contradict its runs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import vaezoo
from vaezoo.entries.schema import Card, SeedSpread
from vaezoo.evaluation.report import as_metrics

RUNS = [{"seed": 0, "value": 0.75}, {"seed": 1, "value": 0.9}, {"seed": 2, "value": 0.8}]


def spread(**changes):
    fields = {"runs": RUNS, "n": 3, "median": 0.8, "min": 0.75, "max": 0.9, "shipped": 1,
              "selection": "the best run", "command": "vaezoo train CARD --seed N"}
    return SeedSpread.model_validate({**fields, **changes})


@pytest.mark.parametrize("runs, median", [
    (RUNS, 0.8),
    (RUNS + [{"seed": 3, "value": 0.7}], 0.775),  # an even count: the mean of the two middle runs
])
def test_a_summary_whose_median_is_its_runs_median_is_accepted_whatever_the_run_order(runs, median):
    values = [run["value"] for run in runs]
    accepted = spread(runs=runs[::-1], n=len(runs), median=median, min=min(values), max=max(values))
    assert [run.seed for run in accepted.runs] == [run["seed"] for run in runs[::-1]]
    with pytest.raises(ValidationError, match="median"):
        spread(runs=runs, n=len(runs), median=round(median + 0.01, 4), min=min(values), max=max(values))


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
    assert written["reconstruction"].seeds is None  # a loss has no spread over seeds
    rewritten = card.model_copy(update={"metrics": {**card.metrics, **written}})
    assert Card.model_validate(rewritten.model_dump()).metrics["cluster_accuracy"].seeds == (
        card.metrics["cluster_accuracy"].seeds)


def test_the_median_of_the_two_middle_runs_carries_no_float_noise():
    from vaezoo.entries.schema import SeedRun
    from vaezoo.evaluation.seeds import spread as seed_spread

    runs = [SeedRun(seed=0, value=0.1), SeedRun(seed=1, value=0.2)]  # their float mean is 0.15000000000000002
    assert seed_spread(runs, 0, "seed 0", "vaezoo train CARD --seed N").median == 0.15
    small = [SeedRun(seed=0, value=3.52581e-05), SeedRun(seed=1, value=3.5259e-05)]  # recorded to 6 digits
    assert seed_spread(small, 0, "seed 0", "vaezoo train CARD --seed N").median == 3.525855e-05
