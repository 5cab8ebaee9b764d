"""Fuzzing checkpoint contents with hypothesis: whatever a readable file holds, reading it as a checkpoint and
checking it against a card gives a checkpoint or one clear line, never a traceback or a changed file.

Each example saves a random structure with ``torch.save`` (tensors, numbers, strings, nested dicts and lists,
some keys of a real checkpoint among them) or mutates one entry of a real checkpoint of a tiny run.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit import make_card

from vaezoo.assemble import build_model
from vaezoo.entries.schema import Card
from vaezoo.errors import TrainingError
from vaezoo.entries.checkpoints import check_model, check_recipe, read_checkpoint, write_checkpoint

FUZZ = settings(max_examples=120, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
KEYS = st.sampled_from(["model", "optimizer", "step", "rng_cpu", "rng_cuda", "rng_ranks", "card", "recipe",
                        "fingerprint", "state", "param_groups", "weight"]) | st.text(max_size=6)
TENSORS = st.builds(lambda n, kind: torch.zeros(n, dtype=kind), st.integers(0, 5),
                    st.sampled_from([torch.float32, torch.uint8, torch.int64, torch.bool]))
LEAVES = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=12) | TENSORS
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
                      max_leaves=12)


@pytest.fixture
def real(tmp_path_factory, data_plugin):
    """A tiny card and a real checkpoint of its model, as a dict."""
    card = Card.model_validate(make_card("tiny", "tiny-fuzz"))
    model = build_model(card)
    optimizer = torch.optim.Adam(model.parameters())
    path = tmp_path_factory.mktemp("real") / "checkpoint.pt"
    write_checkpoint(path, card, model, optimizer.state_dict(), 3, {"rng_cpu": torch.get_rng_state()}, "fix it")
    return card, torch.load(path, weights_only=True)


def read_and_check(path, card) -> None:
    """Read ``path`` and check it against ``card``: a TrainingError of one line is the only failure allowed."""
    before = path.read_bytes()
    try:
        checkpoint = read_checkpoint(path, "start afresh")
        check_recipe(checkpoint, card)
        check_model(checkpoint, card)
    except TrainingError as exc:
        message = str(exc)
        assert "\n" not in message and "checkpoint" in message, message
    assert path.read_bytes() == before, "reading a checkpoint changed it"


@FUZZ
@given(state=VALUES)
def test_any_saved_structure_reads_or_fails_in_one_line(state, real, tmp_path):
    card, _ = real
    path = tmp_path / "checkpoint.pt"
    torch.save(state, path)
    read_and_check(path, card)


@FUZZ
@given(key=KEYS, value=VALUES, drop=st.booleans())
def test_one_changed_entry_of_a_real_checkpoint_reads_or_fails_in_one_line(key, value, drop, real, tmp_path):
    card, state = real
    changed = dict(state)
    if drop:
        changed.pop(key, None)
    else:
        changed[key] = value
    path = tmp_path / "checkpoint.pt"
    torch.save(changed, path)
    read_and_check(path, card)
