"""The release number, in one place (``evalrun --version``, provenance, the package)."""

__version__ = "0.1.0"
