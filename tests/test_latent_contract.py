"""A third-party latent family that follows docs/plugins.md and nothing more gets the whole user's path.

The family is the one the issue's plugin author wrote: binary-Concrete units (Maddison, Mnih & Teh, 2017;
Jang, Gu & Poole, 2017) that set ``distribution = RelaxedBernoulli`` and ``prior = Bernoulli``: no
location-scale form, no prior density at a relaxed sample. It trains, evaluates, traverses over {0, 1} and
loads; a metric it cannot serve is refused before any data is read, naming the metric.
"""

from __future__ import annotations

import math

import pytest
import torch
from kit import install_plugin, make_card, write_toml

import vaezoo
from vaezoo import testing
from vaezoo.assemble import build_model
from vaezoo.cli import main
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, MetricError, PublishWarning
from vaezoo.evaluation import viz
from vaezoo.evaluation.measure import check_metrics, evaluate
from vaezoo.testing import ConformanceError

BINARY_PLUGIN = '''
"""A binary latent family, and a metric that breaks (as a plugin's metric may)."""
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    import torch
    from torch.distributions import Bernoulli, RelaxedBernoulli, kl_divergence
    from vaezoo.latents import LatentFamily, Posterior

    class BinaryConcretePosterior(Posterior):
        def __init__(self, logits, temperature, prior):
            self.logits = logits
            self.code_size = logits.shape[-1]
            self.distribution = RelaxedBernoulli(torch.tensor(temperature).to(logits), logits=logits)
            self.prior = prior

        def rsample(self):
            return self.distribution.rsample()

        @property
        def mode(self):
            return (self.logits > 0).to(self.logits.dtype)

        def kl(self):
            return kl_divergence(Bernoulli(logits=self.logits), self.prior.expand(self.logits.shape))

    class BinaryConcrete(LatentFamily):
        example = {"dim": 3}

        def __init__(self, dim, temperature=0.5):
            super().__init__()
            self.dim = self.code_size = self.param_size = dim
            self.temperature = temperature
            self.register_buffer("prior_probs", torch.full((), 0.5), persistent=False)

        @property
        def prior(self):
            return Bernoulli(probs=self.prior_probs)

        def posterior(self, params):
            return BinaryConcretePosterior(params, self.temperature, self.prior)

        def sample_prior(self, n, generator=None, device=None):
            device = device or self.prior_probs.device
            return (torch.rand(n, self.dim, generator=generator, device=device) < 0.5).float()

    register("binary_concrete", BinaryConcrete)


@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    def explodes(model, dataset, device=None, batch_size=64):
        return model.latent.posterior(None).distribution.loc  # what metrics/codes.py once did

    register("explodes", explodes)
'''

MODEL = {"image_size": 16, "channels": 1, "latent": {"type": "binary_concrete", "dim": 4},
         "encoder": {"type": "mlp_encoder", "hidden": [32]}, "decoder": {"type": "mlp_decoder", "hidden": [32]},
         "regularizers": [{"type": "beta", "beta": 1.0}]}


@pytest.fixture
def binary(data_plugin):
    install_plugin(data_plugin, "binary", BINARY_PLUGIN)


def binary_card(*metrics: str) -> Card:
    """The toy recipe (96 images of bars, 3 steps an epoch) with the binary latent, listing ``metrics``."""
    return Card.model_validate(make_card("toy", "binary-bars", model=MODEL, architecture="vae",
                                         eval_metrics=list(metrics), headline=None, train={"epochs": 1}))


def test_the_binary_family_passes_the_kit_with_its_sweeps_inside_the_prior_support(binary):
    # train=False: the binary plugin's 'explodes' metric would fail the trial run, which the next tests make
    family = testing.check_latent_family("binary_concrete", dim=3, train=False)
    assert [s.values.flatten().tolist() for s in family.sweeps(10, (-3.0, 3.0))] == [[0.0, 1.0]] * 3


def test_a_sweep_outside_the_prior_support_fails_the_kit(binary, monkeypatch):
    from vaezoo.latents import LatentFamily, Sweep

    def old_default(self, steps, span):  # [-1, 2] for a {0, 1} unit, as the issue saw
        values = torch.linspace(-1.0, 2.0, steps)[:, None]
        return [Sweep(i, slice(i, i + 1), i, values) for i in range(self.code_size)]

    monkeypatch.setattr(LatentFamily, "sweeps", old_default)
    with pytest.raises(testing.ConformanceError, match=r"sweeps\(\) of part 'z', dimension 0, leaves the prior's "
                                                       r"support"):
        testing.check_latent_family("binary_concrete", dim=3)


def test_the_binary_family_trains_evaluates_traverses_and_loads(binary, tmp_path, capsys):
    path = write_toml(tmp_path / "binary.toml", make_card("toy", "binary-bars", model=MODEL, architecture="vae",
                                                         eval_metrics=["mutual_info_score"], train={"epochs": 1}))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    written = parse_card(out / "binary-bars-run.toml")
    assert set(written.metrics) == {"reconstruction", "objective", "kl_z", "mutual_info_score"}

    model = vaezoo.load(out)
    traversal = viz.traverse(model, steps=5)
    assert [(row.part, row.index) for row in traversal.dimensions] == [("z", i) for i in range(4)]
    assert traversal.tiles.shape[:2] == (4, 2)  # each unit at 0 and at 1, nowhere else


def test_a_metric_that_fails_at_the_end_leaves_the_weights_and_a_card_without_it(binary, tmp_path):
    card = binary_card("explodes", "mutual_info_score")
    out = tmp_path / "out"
    with pytest.warns(PublishWarning) as warned:
        result = vaezoo.training.train.train(card, out)
    written = parse_card(result.card_path)
    assert "explodes" not in written.metrics and "mutual_info_score" in written.metrics
    [line] = [str(w.message) for w in warned if "explodes" in str(w.message)]
    assert line.startswith("metric 'explodes' of plugin 'binary' failed: AttributeError") and line.endswith(
        f"measure it again with: vaezoo eval {out} --metrics explodes")
    loaded = vaezoo.load(out)  # the weights verify and are the trained ones
    for key, value in result.model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_a_metric_the_family_cannot_serve_is_refused_naming_it_before_any_data_is_read(binary, monkeypatch):
    card = binary_card("elbo", "total_correlation", "mutual_info_score")
    model = build_model(card)
    monkeypatch.setattr("vaezoo.evaluation.measure.card_dataset", lambda *a, **k: pytest.fail("data was read"))
    for refuse in (lambda: check_metrics(model, card), lambda: evaluate(model, card)):
        with pytest.raises(MetricError) as caught:
            refuse()
        message = str(caught.value)
        assert "\n" not in message and "mutual_info_score" not in message and "total_correlation" not in message
        assert message.startswith("card 'binary-bars': metric 'elbo' needs a posterior and a prior density")
        assert ("BinaryConcretePosterior.prior_log_prob() of part 'z' raised LatentError: BinaryConcretePosterior "
                "has no prior_log_prob at these codes: they lie outside the support of its 'prior' (Bernoulli, "
                "support Boolean())") in message and "override" not in message


def test_vaezoo_train_refuses_such_a_metric_before_it_reads_the_data(binary, tmp_path, monkeypatch, capsys):
    path = write_toml(tmp_path / "binary.toml", binary_card("elbo").model_dump(exclude_none=True))
    monkeypatch.setattr("vaezoo.training.train.load_dataset", lambda *a, **k: pytest.fail("data was read"))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith("error: card 'binary-bars': metric 'elbo' needs a posterior and a prior")
    assert not (tmp_path / "out").exists()


def test_vaezoo_train_refuses_sap_of_a_one_dimensional_code_before_it_reads_the_data(binary, tmp_path,
                                                                                      monkeypatch, capsys):
    """The metric refused such a code only once the run had trained: the card was written without it."""
    card = Card.model_validate(make_card("toy", "binary-bars", architecture="vae", eval_metrics=["sap_score"],
                                         headline=None, model={**MODEL, "latent": {"type": "gaussian", "dim": 1}}))
    path = write_toml(tmp_path / "one.toml", card.model_dump(exclude_none=True))
    monkeypatch.setattr("vaezoo.training.train.load_dataset", lambda *a, **k: pytest.fail("data was read"))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    assert "metric 'sap_score' needs a code of 2 dimensions or more (a gap between the two that best predict a " \
           "factor); its code has 1 dimension" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("latent, error", [
    ({"type": "gumbel_categorical", "categories": 3},  # no density at all
     "regularizer 'total_correlation' needs densities of the latent: CategoricalPosterior sets no 'distribution', "
     "so it has no log_density_matrix;"),
    # binary-Concrete samples lie in (0, 1), where the Bernoulli prior has no density: training's unchecked
    # distributions would turn that into a finite, meaningless total correlation; named as a missing density is
    (MODEL["latent"], "regularizer 'total_correlation' needs densities of the latent: BinaryConcretePosterior has "
                      "no prior_log_prob at these codes: they lie outside the support of its 'prior' (Bernoulli, "
                      "support Boolean()); override prior_log_prob() to give one; or give it a part that has them "
                      "with 'part'"),
])
def test_a_regularizer_given_a_latent_without_the_densities_it_needs_stops_the_run_in_one_line(
        binary, tmp_path, capsys, latent, error):
    card = make_card("toy", "bits-bars", architecture="vae", eval_metrics=[],
                     model={**MODEL, "latent": latent, "regularizers": [{"type": "total_correlation"}]})
    path = write_toml(tmp_path / "card.toml", card)
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1].startswith(f"error: {error}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("checks", [True, False], ids=["checks-on", "checks-off-as-torch-compile-leaves-them"])
def test_the_kit_names_the_family_whose_prior_has_no_density_at_its_samples_in_one_line(binary, monkeypatch, checks):
    """vaezoo train sends its author to the kit, which quoted torch's support error, a dump of the codes, and
    blamed the regularizer alone; and passed the family in a process where torch.compile had run, which turns
    torch.distributions' argument checks off for good."""
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", checks)
    with pytest.raises(ConformanceError) as caught:
        testing.check_regularizer("total_correlation", latent={"type": "binary_concrete", "dim": 3},
                                  dataset_size=100, train=False)
    assert torch.distributions.Distribution._validate_args is checks  # left as it was
    message = str(caught.value)
    assert "\\n" not in message and "tensor(" not in message
    assert message.endswith("forward at step 0 raised LatentError: regularizer 'total_correlation' needs densities "
                            "of the latent: BinaryConcretePosterior has no prior_log_prob at these codes: they lie "
                            "outside the support of its 'prior' (Bernoulli, support Boolean()); override "
                            "prior_log_prob() to give one; or give it a part that has them with 'part'")


def test_a_latent_without_densities_is_refused_the_entropy_metrics(binary):
    card = Card.model_validate(make_card("toy", "cat-bars", architecture="vae", eval_metrics=["total_correlation"],
                                         model={**MODEL, "latent": {"type": "gumbel_categorical", "categories": 3}}))
    with pytest.raises(MetricError, match=r"metric 'total_correlation' needs a latent part whose posterior has a "
                                          r"density at any code .*CategoricalPosterior.log_density_matrix\(\) of "
                                          r"part 'z' raised LatentError"):
        check_metrics(build_model(card), card)


def test_the_entropy_metrics_reach_any_family_through_its_densities(binary):
    card = binary_card("total_correlation")
    model = build_model(card)
    [tc] = evaluate(model, card, metrics=["total_correlation"]).values()
    assert math.isfinite(tc) and tc > -0.05  # a KL, up to the estimator's noise


def test_the_entropy_metrics_leave_out_no_part_with_a_density_in_a_joint_latent(binary):
    from vaezoo.assemble import card_dataset
    from vaezoo.metrics.entropy import dataset_entropies
    from vaezoo.metrics.evaluation import Evaluation

    joint = {"type": "joint", "parts": [{"type": "gaussian", "name": "cont", "dim": 2},
                                        {"type": "binary_concrete", "name": "bits", "dim": 3},
                                        {"type": "gumbel_categorical", "name": "cat", "categories": 3}]}
    card = Card.model_validate(make_card("toy", "joint-bars", architecture="vae", eval_metrics=[],
                                         model={**MODEL, "latent": joint}))
    model = build_model(card).eval()
    entropies = dataset_entropies(Evaluation(model, card_dataset(card)), (), samples=50)
    assert entropies.marginal.shape == (5,)  # the Gaussian's 2 and the binary units' 3; the categorical has none


def test_the_protocol_estimator_agrees_with_the_location_scale_one_on_gaussians():
    from vaezoo.latents import Gaussian
    from vaezoo.metrics.entropy import estimate_entropies, estimate_entropies_from_posteriors

    generator = torch.Generator().manual_seed(0)
    factors = torch.arange(400) % 4
    params = torch.randn(400, 4, generator=generator, dtype=torch.float64) * 0.3
    params[:, 0] += factors * 2.0  # dimension 0 tells the factor; dimension 1 does not
    family = Gaussian(2).double()
    batches = [{"z": family.posterior(chunk)} for chunk in params.split(64)]
    generic = estimate_entropies_from_posteriors(batches, factors[:, None], samples=400)
    fast = estimate_entropies(params[:, :2], params[:, 2:], factors[:, None], samples=400)
    assert torch.allclose(generic.marginal, fast.marginal, atol=0.15)
    assert torch.allclose(generic.conditional, fast.conditional, atol=0.15)
    assert generic.joint == pytest.approx(fast.joint, abs=0.25)
    assert math.log(4) > generic.mutual_information[0, 0] > 0.5 > 0.1 > generic.mutual_information[0, 1]


def test_the_step_zero_check_leaves_the_random_state_as_it_was(binary):
    card = binary_card("elbo")
    model = build_model(card)
    state = torch.get_rng_state()
    with pytest.raises(MetricError):
        check_metrics(model, card)
    assert torch.equal(torch.get_rng_state(), state)


def test_a_gaussian_model_serves_what_the_binary_one_cannot_and_factors_are_checked(binary):
    card = Card.model_validate(make_card("toy", "gauss-bars", architecture="vae", eval_metrics=["elbo"],
                                         model={**MODEL, "latent": {"type": "gaussian", "dim": 4}}))
    check_metrics(build_model(card), card)
    with pytest.raises(MetricError, match="metric 'mig_chen' needs a dataset with ground-truth factors"):
        check_metrics(build_model(card), card, ["mig_chen"])


def test_plugins_parts_lists_every_registered_name_with_its_kind_and_plugin(binary, capsys):
    import json

    assert main(["plugins", "--parts", "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)
    assert {"kind": "latent family", "name": "binary_concrete", "plugin": "binary"} in parts
    assert {"kind": "metric", "name": "explodes", "plugin": "binary"} in parts
    assert {"kind": "latent family", "name": "gaussian", "plugin": "core"} in parts


def test_a_prior_without_icdf_on_a_bounded_support_asks_for_its_own_sweeps():
    from torch.distributions import Gamma

    from vaezoo.errors import LatentError
    from vaezoo.latents import LatentFamily

    class Rates(LatentFamily):  # a Gamma prior: support (0, inf), and torch gives it no icdf
        code_size = param_size = 2

        @property
        def prior(self):
            return Gamma(torch.ones(()), torch.ones(()))

    with pytest.raises(LatentError, match=r"^latent family test_a_prior_without_icdf_on_a_bounded_support_asks_for_its_"
                                          r"own_sweeps.<locals>.Rates \(test_latent_contract\): its prior, Gamma, has "
                                          r"no icdf, .*; override sweeps\(\)$"):
        Rates().sweeps(5, (-3.0, 3.0))  # named with its module, as vaezoo show and the gallery say it to its users


@pytest.mark.parametrize(("broken", "message"), [
    ("mode", "the posterior's mode is not finite (NaN or inf) for 32 of the 32 images on the first batch"),
    ("rsample", "rsample() is not finite (NaN or inf) for 32 of the 32 images on the first batch"),
    ("kl", "kl_parts()['z'] averages -"),
    ("kl_scalar", "kl_parts()['z'] is a tensor of shape (), not one row per image"),  # an IndexError in the beta
    ("device", "the posterior's mode is on meta, not on cpu, where the images and the encoder's parameters are"),
])
def test_a_family_whose_code_or_kl_is_not_a_number_stops_the_run_before_its_first_step(
        binary, tmp_path, monkeypatch, capsys, broken, message):
    """A NaN mode trained silently and published a card of NaN losses; a NaN rsample was blamed on the learning
    rate; a negative KL lowered the objective. The first batch names the family."""
    from vaezoo.plugins import registry

    family = registry("latent family")["binary_concrete"]
    posterior_class = type(family(2).posterior(torch.zeros(1, 2)))
    nan = lambda self, *args: torch.full_like(self.logits, math.nan)  # noqa: E731
    replaced = {"mode": property(nan), "rsample": nan, "kl": lambda self: -torch.ones_like(self.logits),
                "kl_scalar": lambda self: self.logits.sum() * 0 + 1.0,
                "device": property(lambda self: torch.zeros_like(self.logits, device="meta"))}[broken]
    monkeypatch.setattr(posterior_class, {"device": "mode", "kl_scalar": "kl"}.get(broken, broken), replaced)
    if broken == "device":  # the code built on another device than the model's (the CPU for a CUDA model)
        with pytest.raises(ConformanceError, match="mode is on meta, not on cpu, where its inputs are"):
            testing.check_latent_family("binary_concrete", dim=2)
    path = write_toml(tmp_path / "binary.toml", binary_card().model_dump(mode="json", exclude_none=True))
    code = main(["train", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: latent family ") and ".BinaryConcrete (fake_binary" in last and message in last
    assert not (tmp_path / "out").exists()


EXPLODING_PLUGIN = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    from vaezoo.latents.gaussian import Gaussian

    class Exploding(Gaussian):
        def posterior(self, params):
            raise RuntimeError("exploded on purpose")

    register("exploding", Exploding)
'''


def test_a_family_that_raises_is_named_in_one_line_with_its_plugin(data_plugin, tmp_path, capsys):
    """A third-party part's own error (not vaezoo's, not the input's) ended the commands in a traceback."""
    install_plugin(data_plugin, "exploding", EXPLODING_PLUGIN)
    model = {**MODEL, "latent": {"type": "exploding", "dim": 4}}
    path = write_toml(tmp_path / "card.toml", make_card("toy", "exploding-bars", model=model, architecture="vae",
                                                          eval_metrics=[], train={"epochs": 1}))
    code = main(["train", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: plugin 'exploding' (") and "raised RuntimeError: exploded on purpose; " in last
    assert not (tmp_path / "out").exists()


def test_a_family_whose_mode_is_nan_for_some_test_images_is_named_and_no_nan_reaches_the_card(binary, monkeypatch):
    """A mode NaN past the first-batch check published NaN losses and scores computed from NaN codes (exit 0)."""
    from vaezoo.errors import PluginError
    from vaezoo.plugins import registry

    card = binary_card("mutual_info_score")
    model = build_model(card)
    posterior_class = type(registry("latent family")["binary_concrete"](2).posterior(torch.zeros(1, 2)))
    first_row_nan = property(lambda self: torch.where(torch.arange(len(self.logits))[:, None] == 0, math.nan,
                                                      (self.logits > 0).float()))
    monkeypatch.setattr(posterior_class, "mode", first_row_nan)
    with pytest.raises(PluginError, match=r"the posterior's mode is not finite \(NaN or inf\) for 1 of the 32 images "
                                          r"of the batch of test images from 0$"):
        evaluate(model, card)


NO_PRIOR_PLUGIN = '''
"""Binary-Concrete units whose posterior sets 'distribution' and no 'prior' (docs/plugins.md: both optional)."""
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    import torch
    from torch.distributions import Bernoulli, RelaxedBernoulli, kl_divergence
    from vaezoo.latents import LatentFamily, Posterior

    class NoPriorPosterior(Posterior):
        def __init__(self, logits):
            self.logits, self.code_size = logits, logits.shape[-1]
            self.distribution = RelaxedBernoulli(torch.tensor(0.5).to(logits), logits=logits)

        def rsample(self):
            return self.distribution.rsample()

        @property
        def mode(self):
            return torch.sigmoid(self.logits)

        def kl(self):
            return kl_divergence(Bernoulli(logits=self.logits), Bernoulli(probs=torch.full_like(self.logits, 0.5)))

    class NoPrior(LatentFamily):
        example = {"dim": 3}

        def __init__(self, dim):
            super().__init__()
            if dim < 1:
                raise ValueError(f"no_prior_concrete needs dim >= 1, got {dim}")
            self.dim = self.code_size = self.param_size = dim
            self.register_buffer("prior_probs", torch.full((), 0.5), persistent=False)

        @property
        def prior(self):
            return Bernoulli(probs=self.prior_probs)

        def posterior(self, params):
            return NoPriorPosterior(params)

        def sample_prior(self, n, generator=None, device=None):
            device = device or self.prior_probs.device
            return (torch.rand(n, self.dim, generator=generator, device=device) < 0.5).float()

    register("no_prior_concrete", NoPrior)
'''


def test_a_posterior_with_a_distribution_and_no_prior_has_its_densities_and_passes_the_kit(data_plugin):
    """log_prob and log_density_matrix read only 'distribution', yet both raised without a 'prior', and the kit
    failed such a family on them; the entropy metrics, which need no prior density, were refused it."""
    from vaezoo.errors import LatentError

    install_plugin(data_plugin, "noprior", NO_PRIOR_PLUGIN)
    family = testing.check_latent_family("no_prior_concrete", dim=3, train=False)
    posterior = family.posterior(torch.tensor([[0.0, 1.0, -2.0], [3.0, 0.5, 0.0]]))
    z = torch.tensor([[0.2, 0.7, 0.1], [0.9, 0.4, 0.5]])
    assert torch.equal(posterior.log_prob(z), posterior.distribution.log_prob(z))
    assert torch.equal(posterior.log_density_matrix(z)[1, 0], posterior.distribution.log_prob(z[1])[0])
    with pytest.raises(LatentError, match=r"^NoPriorPosterior sets no 'prior', so it has no prior_log_prob; set "
                                          r"'prior' \(a torch.distributions object per dimension\) or override "
                                          r"prior_log_prob\(\)$"):
        posterior.prior_log_prob(z)
    model = {**MODEL, "latent": {"type": "no_prior_concrete", "dim": 4}}
    card = Card.model_validate(make_card("toy", "noprior-bars", model=model, architecture="vae",
                                         eval_metrics=["total_correlation"], headline=None))
    check_metrics(build_model(card), card, ["total_correlation"])  # an entropy metric: no prior needed
    with pytest.raises(MetricError, match=r"metric 'elbo' needs a posterior and a prior density .*NoPriorPosterior\."
                                          r"prior_log_prob\(\) of part 'z' raised LatentError: NoPriorPosterior "
                                          r"sets no 'prior'"):
        check_metrics(build_model(card), card, ["elbo"])


def test_a_metric_refused_to_a_family_without_a_prior_advises_only_what_its_user_can_do(data_plugin):
    """The refusal passed on the family author's fix ("set 'prior' ... or override prior_log_prob()") and a card's
    ended "or give the model what it needs": neither is open to whoever evaluates a third-party family."""
    install_plugin(data_plugin, "noprior", NO_PRIOR_PLUGIN)
    model = {**MODEL, "latent": {"type": "no_prior_concrete", "dim": 1}}
    card = Card.model_validate(make_card("toy", "noprior-bars", model=model, architecture="vae",
                                         eval_metrics=["elbo", "sap_score"], headline=None))
    for metrics, fix in ((None, "(remove it from eval_metrics)"), (["elbo"], "(leave it out of metrics)")):
        with pytest.raises(MetricError) as caught:
            check_metrics(build_model(card), card, metrics)
        message = str(caught.value)
        assert "raised LatentError: NoPriorPosterior sets no 'prior', so it has no prior_log_prob" in message
        assert "set 'prior'" not in message and "override" not in message and "give the model" not in message
        assert message.endswith(fix)


def test_a_part_that_refuses_the_card_s_arguments_is_named_with_its_own_plugin(data_plugin, tmp_path, capsys):
    """A third-party family's ValueError was blamed on the architecture that built it ('vae' of plugin 'core')."""
    install_plugin(data_plugin, "noprior", NO_PRIOR_PLUGIN)
    model = {**MODEL, "latent": {"type": "no_prior_concrete", "dim": 0}}
    path = write_toml(tmp_path / "card.toml", make_card("toy", "noprior-bars", model=model, architecture="vae",
                                                        eval_metrics=[]))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {path}: section 'model' does not fit latent family 'no_prior_concrete' of plugin 'noprior': "
        f"ValueError: no_prior_concrete needs dim >= 1, got 0")
    joint = {**MODEL, "latent": {"type": "joint", "parts": [{"type": "gaussian", "dim": 2, "name": "c"},
                                                            {"type": "no_prior_concrete", "dim": 0, "name": "b"}]}}
    card = Card.model_validate(make_card("toy", "noprior-bars", model=joint, architecture="vae", eval_metrics=[],
                                         headline=None))
    with pytest.raises(CardError, match=r": section 'model' does not fit latent family 'no_prior_concrete' of plugin "
                                        r"'noprior': ValueError: no_prior_concrete needs dim >= 1, got 0$"):
        build_model(card)
