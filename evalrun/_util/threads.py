"""How long torch's idle OpenMP threads spin before they sleep: short, so jobs share cores.

torch's CPU build runs its parallel regions on GNU OpenMP (libgomp), whose idle threads spin
for ``GOMP_SPINCOUNT`` = 300,000 iterations before sleeping. Alone on a machine
that is free speed; with several jobs on the same cores it is the classic oversubscription
trap: a spinning thread holds a core while the thread it waits for is descheduled. Three
copies of the README's main job on 2 cores took 17–29 minutes each against about 2 alone.

At 20,000 iterations a job alone is within the noise of the default (157 s against 152–154 s),
and three jobs at once each finish in 1.26–1.33 times their fair share (docs/benchmarks.md,
"Several jobs at once"). ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once) shares best but costs a
job alone about 8% in futex wake-ups.

libgomp reads its settings once, when it is loaded (with ``import torch``), so this must run
before that: ``import evalrun`` calls it. Where torch was imported first, the setting still
reaches the processes the job starts (pytest-xdist workers, the unlearning runs). A setting
the user made is kept.
"""

from __future__ import annotations

import os
from typing import MutableMapping

#: libgomp's spin count evalrun starts torch with, unless the user set one
SPIN_COUNT = "20000"

#: the user's settings that decide OpenMP's waiting; any one of them present: evalrun sets none
USER_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def share_cores(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set libgomp's spin count to :data:`SPIN_COUNT` unless the user chose how OpenMP waits.
    Returns whether it set it."""
    if any(name in environ for name in USER_SETTINGS):
        return False
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return True
