"""The core's own parts, registered through the same hooks plugins use.

Imports of torch happen inside the hooks so that loading plugins stays light.
"""

from vaezoo.hookspecs import hookimpl


@hookimpl
def vaezoo_register_architectures(register):
    from vaezoo.model import build_vae

    register("vae", build_vae)


@hookimpl
def vaezoo_register_latent_families(register):
    from vaezoo.latents import Gaussian, GumbelCategorical, Joint

    register("gaussian", Gaussian)
    register("gumbel_categorical", GumbelCategorical)
    register("joint", Joint)


@hookimpl
def vaezoo_register_regularizers(register):
    from vaezoo.regularizers import Beta, Capacity, TotalCorrelation

    register("beta", Beta)
    register("capacity", Capacity)
    register("total_correlation", TotalCorrelation)


@hookimpl
def vaezoo_register_nets(register):
    from vaezoo.nets import ConvDecoder, ConvEncoder, MLPDecoder, MLPEncoder

    register("conv_encoder", ConvEncoder)
    register("conv_decoder", ConvDecoder)
    register("mlp_encoder", MLPEncoder)
    register("mlp_decoder", MLPDecoder)


@hookimpl
def vaezoo_register_likelihoods(register):
    from vaezoo.likelihoods import Bernoulli, Gaussian

    register("bernoulli", Bernoulli)
    register("gaussian", Gaussian)


@hookimpl
def vaezoo_register_datasets(register):
    from vaezoo.data.celeba import CelebA
    from vaezoo.data.chairs import Chairs
    from vaezoo.data.dsprites import DSpritesDataset
    from vaezoo.data.folder import ImageFolder
    from vaezoo.data.synthetic import Synthetic
    from vaezoo.data.torchvision_sets import fashion_mnist, mnist

    register("mnist", mnist)
    register("fashion_mnist", fashion_mnist)
    register("dsprites", DSpritesDataset())
    register("celeba", CelebA())
    register("chairs", Chairs())
    register("synthetic", Synthetic())
    register("image_folder", ImageFolder())


@hookimpl
def vaezoo_register_metrics(register):
    from vaezoo.metrics.betavae_score import betavae_score
    from vaezoo.metrics.dci import dci_completeness, dci_disentanglement, dci_informativeness
    from vaezoo.metrics.entropy import total_correlation
    from vaezoo.metrics.factorvae_score import factorvae_score
    from vaezoo.metrics.log_likelihood import elbo, importance_log_likelihood
    from vaezoo.metrics.mig import mig_chen, mig_dlib
    from vaezoo.metrics.modularity import explicitness, modularity
    from vaezoo.metrics.sap import sap_score
    from vaezoo.metrics.unsupervised import gaussian_total_correlation, mutual_info_score

    # the disentanglement suite in the order a card lists it (vaezoo.assemble.metric_suite), then the likelihoods
    register("mig_chen", mig_chen)
    register("total_correlation", total_correlation)
    register("mig_dlib", mig_dlib)
    register("betavae_score", betavae_score)
    register("factorvae_score", factorvae_score)
    register("sap_score", sap_score)
    register("dci_disentanglement", dci_disentanglement)
    register("dci_completeness", dci_completeness)
    register("dci_informativeness", dci_informativeness)
    register("modularity", modularity)
    register("explicitness", explicitness)
    register("gaussian_total_correlation", gaussian_total_correlation)
    register("mutual_info_score", mutual_info_score)
    register("elbo", elbo)
    register("importance_log_likelihood", importance_log_likelihood)
