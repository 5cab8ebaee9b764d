"""Exceptions vaezoo raises on bad input. Each message is one line naming the problem and the fix."""


class VaezooError(Exception):
    """Base class: the CLI prints these as a one-line error and exits non-zero."""


class UnknownNameError(VaezooError, KeyError):
    """A name that no registry or card holds."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DuplicateNameError(VaezooError):
    """Two plugins (or two cards) claim one name."""


class CardError(VaezooError):
    """A zoo card that cannot be read or does not validate."""


class WeightsError(VaezooError):
    """A weights file that is missing, does not verify, or does not fit its model."""


class PluginError(VaezooError):
    """A plugin broke a rule of the hook it implements."""


class DataError(VaezooError):
    """A dataset that cannot be found or read."""


class TrainingError(VaezooError):
    """A training run that cannot go on (NaN loss, bad checkpoint)."""


class OutputError(VaezooError):
    """A file vaezoo was asked to write that cannot be written where it was asked."""


class DeviceError(VaezooError):
    """A device that is not one, or that this machine does not have."""


class DtypeError(VaezooError, TypeError):
    """A dtype a model's parameters cannot take (not one of float32, float64, float16, bfloat16)."""


class InputError(VaezooError):
    """Images that are not what a model takes (shape, channels, type or value range)."""


class MetricError(VaezooError):
    """A metric a model cannot serve (its latent, likelihood or dataset lacks what the metric needs)."""
