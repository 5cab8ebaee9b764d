"""A trained run's card is its own: nothing measured on the card it was trained from is copied, its label
matching is measured on its own model, and every command it records runs as written."""

from __future__ import annotations

import shlex

import numpy as np
import pytest
from kit import cli, make_card, write_entry
from vaezoo_jointvae.sections import card_labels

import vaezoo
from vaezoo.cli import main
from vaezoo.entries.catalog import get_card, parse_card
from vaezoo.training.train import train

ZOO_NOTE = "seed 20, the whole 100-epoch recipe"


@pytest.fixture
def zoo_entry(data_plugin, cards_dir):
    """A zoo card of the toy recipe that carries everything a published card can: notes, a spread over seeds,
    a label matching, metrics."""
    spread = {"runs": [{"seed": 0, "value": 0.75}, {"seed": 1, "value": 0.95}], "n": 2, "median": 0.85,
              "min": 0.75, "max": 0.95, "shipped": 1, "selection": "the best", "command": "vaezoo seeds x"}
    metric = {"value": 0.95, "command": "vaezoo eval toyvae-bars", "vaezoo_version": "0.1.0", "note": ZOO_NOTE,
              "seeds": spread}
    labels = {"discrete0": {"category_to_label": [2, 0, 1], "split": "test", "command": "made up",
                            "vaezoo_version": "0.1.0"}}
    card = make_card("toy", metrics={"cluster_accuracy": metric}, headline="cluster_accuracy", labels=labels)
    write_entry(cards_dir, card)
    return get_card("toyvae-bars")


def test_a_run_from_a_zoo_card_carries_none_of_its_provenance(zoo_entry, tmp_path):
    out = tmp_path / "run"
    result = train(zoo_entry, out)
    written = parse_card(result.card_path)
    assert written.metrics["cluster_accuracy"].note is None and written.metrics["cluster_accuracy"].seeds is None
    assert all(ZOO_NOTE not in (m.note or "") for m in written.metrics.values())
    assert all(m.seeds is None for m in written.metrics.values())
    assert card_labels(written)["discrete0"].command.startswith("python -m vaezoo_jointvae.labels ")  # measured anew

    # the matching is the run's own: on the test split, predict_label is exactly as accurate as cluster_accuracy
    model = vaezoo.load(out)
    test = vaezoo.assemble.card_dataset(written, split="test")
    predicted = model.predict_label(test.batch(slice(0, len(test)))).numpy()
    assert np.mean(predicted == test.labels.numpy()) == pytest.approx(written.metrics["cluster_accuracy"].value,
                                                                      abs=1e-6)


def test_the_commands_a_run_records_run_as_written(zoo_entry, tmp_path, capsys):
    from vaezoo_jointvae import labels

    out = tmp_path / "a run folder"  # a space: the commands must be quoted
    written = parse_card(train(zoo_entry, out).card_path)
    commands = {m.command for m in written.metrics.values()}
    assert commands == {shlex.join(["vaezoo", "eval", str(out)])}
    capsys.readouterr()
    assert main(shlex.split(commands.pop())[1:] + ["--check"]) == 0
    label_command = shlex.split(card_labels(written)["discrete0"].command)
    assert label_command[:3] == ["python", "-m", "vaezoo_jointvae.labels"]
    assert labels.main(label_command[3:]) == 0
    assert f"category -> label {card_labels(written)['discrete0'].category_to_label}" in capsys.readouterr().out


def test_a_run_s_card_records_the_plugin_distributions_it_was_made_with(data_plugin, tmp_path, capsys):
    """A run's card named its architecture and dataset but not the distributions that provide them: a user without
    the plugin was told to "install the plugin that registers it", not which one."""
    import shutil

    from pydantic import ValidationError

    from vaezoo.entries.schema import Card
    from vaezoo.errors import UnknownNameError
    from vaezoo.plugins import get_plugins

    distribution = get_plugins().info["testdata"].distribution
    out = tmp_path / "run"
    written = parse_card(train(Card.model_validate(make_card("tiny")), out).card_path)
    assert written.plugins == {distribution: "1.0"}  # the dataset's; the architecture is vaezoo's own
    code, shown, _ = cli(capsys, "info", str(out))
    assert code == 0 and f'[plugins]\n{distribution} = "1.0"\n' in shown

    for installed in data_plugin.glob(f"{distribution}*"):  # uninstalled, as pip would
        shutil.rmtree(installed) if installed.is_dir() else installed.unlink()
    vaezoo.plugins.reset()
    with pytest.raises(UnknownNameError, match=rf"^card 'tiny-blobs-run' needs the dataset 'tiny_blobs', which no "
                                               rf"installed plugin registers \(it was made with {distribution} 1\.0\); "
                                               rf"install the plugin"):
        vaezoo.load(out)
    with pytest.raises(ValidationError, match="plugins"):  # printed by vaezoo info and in errors: printable text only
        Card.model_validate(make_card("tiny", plugins={distribution: "1.0\x1b[2J"}))
