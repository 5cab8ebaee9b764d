"""JointVAE's card section ``[labels]``: which dataset label each category of a categorical part stands for.

Registered with ``vaezoo_register_card_sections``; pydantic only (``vaezoo list`` reads cards without torch).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, RootModel


class LabelMatching(BaseModel):
    """The dataset label each category of one categorical part stands for, measured by a command."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category_to_label: list[int] = Field(description="category i stands for label category_to_label[i]; -1: none")
    split: str = Field(description="the dataset split it was measured on")
    command: str
    vaezoo_version: str


class Labels(RootModel[dict[str, LabelMatching]]):
    """``[labels.PART]``: the :class:`LabelMatching` of each categorical part, by part name."""

    model_config = ConfigDict(frozen=True)


def card_labels(card) -> dict[str, LabelMatching]:
    """The matchings ``card`` stores (none for a card without ``[labels]``)."""
    return Labels.model_validate(card.sections.get("labels", {})).root
