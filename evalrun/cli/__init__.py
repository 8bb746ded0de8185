"""The ``evalrun`` command: :mod:`.main` parses the command line and dispatches."""

from evalrun._util.legacy import forward

#: ``evalrun.cli.main`` / ``console_main`` as before the layout change
__getattr__ = forward("evalrun.cli.main")
