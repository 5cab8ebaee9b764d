"""A zoo entry: its card, its weights and a training checkpoint of its model.

- :mod:`vaezoo.entries.schema`: what a card holds (pure pydantic).
- :mod:`vaezoo.entries.catalog`: finding cards, listing them, resolving a name or a path to one.
- :mod:`vaezoo.entries.huggingface`: cards and weights from Hugging Face Hub repositories.
- :mod:`vaezoo.entries.entry`: writing an entry, finding its weights and verifying them; the one writer of a card.
- :mod:`vaezoo.entries.recipe`: what decides a run, its fingerprint and where two recipes differ.
- :mod:`vaezoo.entries.checkpoints`: what a training checkpoint holds, written and read back when it fits.
- :mod:`vaezoo.entries.toml_update`: a card's text edited to new data, its comments and layout kept.

Imports, of vaezoo's folders, only :mod:`vaezoo.store`; never training, evaluation, the CLI or the extras.
"""
