"""Joint VAE (Dupont, 2018, "Learning Disentangled Joint Continuous and Discrete Representations").

Registers the ``jointvae`` architecture, the ``cluster_accuracy`` and ``shape_accuracy`` metrics, the
``jointvae-original`` checkpoint converter and the card section ``[labels]`` (each category's label). Heavy
imports happen inside the hooks.
"""

from vaezoo.hookspecs import hookimpl


@hookimpl
def vaezoo_register_architectures(register):
    from vaezoo_jointvae.model import build_jointvae

    register("jointvae", build_jointvae)


@hookimpl
def vaezoo_register_metrics(register):
    from vaezoo_jointvae.metrics import cluster_accuracy, shape_accuracy

    register("cluster_accuracy", cluster_accuracy)
    register("shape_accuracy", shape_accuracy)


@hookimpl
def vaezoo_register_converters(register):
    from vaezoo_jointvae.convert import convert_original

    register("jointvae-original", convert_original)


@hookimpl
def vaezoo_register_card_sections(register):
    from vaezoo_jointvae.sections import Labels

    register("labels", Labels)
