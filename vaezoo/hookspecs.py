"""pluggy hook specifications: what a vaezoo plugin may implement.

Every ``vaezoo_register_*`` hook receives a ``register(name, obj)`` callback, as
in simonw/llm: the host keeps control of names and refuses duplicates. Keep a
plugin's top-level module light (no torch import): ``vaezoo list`` loads plugins
to find card directories and must not import torch. Import heavy modules inside
the hook functions.
"""

import pluggy

hookspec = pluggy.HookspecMarker("vaezoo")
hookimpl = pluggy.HookimplMarker("vaezoo")


@hookspec
def vaezoo_register_architectures(register):
    """Register model builders: ``register(name, builder)``.

    ``builder(**card.model)`` returns a :class:`vaezoo.model.VAE`.
    """


@hookspec
def vaezoo_register_latent_families(register):
    """Register latent families: ``register(name, cls)``, ``cls`` a :class:`vaezoo.latents.LatentFamily`."""


@hookspec
def vaezoo_register_regularizers(register):
    """Register regularizers: ``register(name, cls)``, ``cls`` a :class:`vaezoo.regularizers.Regularizer`."""


@hookspec
def vaezoo_register_nets(register):
    """Register encoder/decoder nets: ``register(name, cls)``, ``cls`` an ``nn.Module`` subclass."""


@hookspec
def vaezoo_register_likelihoods(register):
    """Register likelihoods: ``register(name, cls)``, ``cls`` a :class:`vaezoo.likelihoods.Likelihood`."""


@hookspec
def vaezoo_register_datasets(register):
    """Register datasets: ``register(name, dataset)``, ``dataset`` a :class:`vaezoo.data.Dataset` instance."""


@hookspec
def vaezoo_register_metrics(register):
    """Register evaluation metrics: ``register(name, fn)``; see :mod:`vaezoo.metrics`."""


@hookspec
def vaezoo_register_converters(register):
    """Register checkpoint converters: ``register(name, fn)``.

    ``fn(source: Path, out: Path, dataset: str, name: str) -> Path`` turns a
    checkpoint of another codebase into ``out/NAME.safetensors`` plus a card
    called ``name``, and returns the card's path (``vaezoo convert CONVERTER
    SOURCE --dataset D --out DIR [--name NAME]``; the CLI never passes a name
    of the built-in zoo).
    """


@hookspec
def vaezoo_register_card_sections(register):
    """Register card sections: ``register(name, model)``, ``model`` a pydantic model class.

    A card may then hold a top-level table ``[NAME]`` that vaezoo's schema does not know (e.g. JointVAE's
    ``[labels]``); discovery validates it with ``model`` and keeps it in ``card.sections[NAME]``. Define the model
    in a module that does not import torch: ``vaezoo list`` reads cards without it.
    """


@hookspec
def vaezoo_register_commands(register):
    """Register ``vaezoo`` subcommands: ``register(name, command)``, ``command`` a :class:`vaezoo.cli.Command`.

    Any object with the same attributes will do: ``help`` (one line, shown by ``vaezoo --help``), ``run(args)``
    (the parsed :class:`argparse.Namespace` -> an exit code, None for 0) and, optionally,
    ``add_arguments(parser)`` (adds the command's arguments to its ``argparse`` parser). A name is lowercase
    words joined by ``-`` and never a built-in command's. Import heavy modules inside ``run``: the hook runs
    whenever ``vaezoo --help`` is shown.
    """


@hookspec
def vaezoo_card_dirs():
    """Return a list of directories holding zoo cards (``*.toml``)."""
