"""What a part is given beyond its own spec: the facts of the data, and a way to build its sub-parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FACTS = ("image_size", "channels", "dataset_size", "factor_names")
"""The facts of the data a builder or part may take as arguments of these names."""


@dataclass(frozen=True)
class BuildContext:
    """Handed to builders and parts by :mod:`vaezoo.assemble`, the only module that looks names up.

    A part that needs a fact of the data takes an argument of that name (``image_size``,
    ``channels``, ``dataset_size``, ``factor_names``) and receives it from here, so cards do not
    restate what the dataset knows. A composite part (an architecture, a joint latent) takes a
    ``context`` argument and builds its sub-parts with :meth:`build`.

    Attributes:
        builder: ``builder(kind, spec, context)`` -> the part; :meth:`build` calls it with this context.
        image_size: height and width of the input images.
        channels: channels of the input images.
        dataset_size: images in the training split.
        factor_names: the dataset's ground-truth factors, in order; () when it has none.
    """

    builder: Callable[[str, Any, BuildContext], Any]
    image_size: int | None = None
    channels: int | None = None
    dataset_size: int | None = None
    factor_names: tuple[str, ...] = ()

    def build(self, kind: str, spec: Any) -> Any:
        """The part ``spec`` describes, e.g. ``build("latent family", {"type": "gaussian", "dim": 10})``."""
        return self.builder(kind, spec, self)

    def facts(self) -> dict[str, Any]:
        """The facts this context knows, by argument name."""
        values = {name: getattr(self, name) for name in FACTS}
        return {name: value for name, value in values.items() if value not in (None, ())}
