"""A zoo entry, a card and its weights, in four parts.

- :mod:`vaezoo.entries.schema`: what a card holds (pure pydantic).
- :mod:`vaezoo.entries.catalog`: finding cards, listing them, resolving a name or a path to one.
- :mod:`vaezoo.entries.entry`: writing an entry, finding its weights and verifying them.
- :mod:`vaezoo.entries.recipe`: what decides a run, its fingerprint and where two recipes differ.
"""
