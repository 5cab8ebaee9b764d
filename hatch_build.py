"""Build hook: the zoo's cards in the wheel, from an sdist as from the checkout.

The checkout's wheel takes the package ``vaezoo_zoo`` from ``plugins/vaezoo_zoo``, a link to ``zoo_cards/``. An
sdist holds ``zoo_cards/`` without the link (hatchling stores files, not links: the cards would come twice), so
where the link is absent the wheel, editable or not, takes ``zoo_cards/`` as ``vaezoo_zoo``.
"""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ZooCardsHook(BuildHookInterface):
    """Force-include ``zoo_cards/`` as ``vaezoo_zoo`` where ``plugins/vaezoo_zoo`` is absent."""

    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        if not (root / "plugins" / "vaezoo_zoo").exists():
            build_data["force_include"][str(root / "zoo_cards")] = "vaezoo_zoo"
