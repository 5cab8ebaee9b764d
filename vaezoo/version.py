"""vaezoo's version, in a module that imports nothing so that anything can import it."""

__version__ = "0.3.0"
