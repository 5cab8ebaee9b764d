"""JointVAE's card section ``[labels]``: which dataset label each category of a categorical part stands for.

Registered with ``vaezoo_register_card_sections``; pydantic only (``vaezoo list`` reads cards without torch).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, RootModel

Label = Annotated[int, Field(strict=True, ge=-1, le=2**63 - 1)]
"""A label as the matching gives it: a whole number (not "2", 2.0 or true, which a hand edit may leave), -1 for
none, within int64 (a larger one failed inside ``predict_label``)."""


class LabelMatching(BaseModel):
    """The dataset label each category of one categorical part stands for, measured by a command."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category_to_label: list[Label] = Field(description="category i stands for label category_to_label[i]; -1: none")
    split: str = Field(description="the dataset split it was measured on")
    command: str
    vaezoo_version: str


class Labels(RootModel[dict[str, LabelMatching]]):
    """``[labels.PART]``: the :class:`LabelMatching` of each categorical part, by part name."""

    model_config = ConfigDict(frozen=True)


def card_labels(card) -> dict[str, LabelMatching]:
    """The matchings ``card`` stores (none for a card without ``[labels]``)."""
    return Labels.model_validate(card.sections.get("labels", {})).root
