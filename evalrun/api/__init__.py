"""evalrun from Python: run an evaluation, read a store, detect a watermark, watermark your own
generation. Each function goes through the code the command line uses (the same options,
checks, store and detectors); see docs/python-api.md. The names are re-exported, lazily, by
:mod:`evalrun`."""
