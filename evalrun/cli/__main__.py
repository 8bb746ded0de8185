"""``python -m evalrun.cli``: the same as the ``evalrun`` command."""

import sys

from evalrun.cli.main import console_main

sys.exit(console_main())
