"""Run a command on another CPU path than this machine's fastest one.

    python -m evalrun.testing.other_cpu pytest -m numeric
    python -m evalrun.testing.other_cpu --print      # the environment, as shell assignments

Float results move in their last bits from one CPU to another: torch, MKL, oneDNN, OpenBLAS and
NumPy each pick SIMD kernels by the features the CPU reports, and split reductions by the
thread count. A test that only ever runs on the machine that wrote its expected values cannot
tell a value the arithmetic guarantees from one that machine happened to produce. This
launcher gives the command the environment of a plainer machine before any of those libraries
loads (they read it once, at import): torch's portable kernels instead of AVX2/AVX-512
(``ATEN_CPU_CAPABILITY=default``), one thread everywhere, MKL and oneDNN held to SSE4
instructions and OpenBLAS to an older core on x86-64, and NumPy's dispatch of every SIMD
feature above its build baseline switched off. See docs/reproducibility.md.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys

#: one thread: reductions split differently from the default run (torch reads OMP_NUM_THREADS)
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
#: torch's ATen kernels without AVX2/AVX-512 (its "default" capability, also on arm64)
ATEN = {"ATEN_CPU_CAPABILITY": "default"}
#: the BLAS and oneDNN kernels of an older x86-64 CPU (ignored by libraries not present)
X86_KERNELS = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
               "OPENBLAS_CORETYPE": "Nehalem"}
ARM_KERNELS = {"OPENBLAS_CORETYPE": "ARMV8"}


def numpy_dispatch_features() -> list[str]:
    """The SIMD features NumPy dispatches to on this CPU beyond its build's baseline: the ones
    ``NPY_DISABLE_CPU_FEATURES`` may switch off (NumPy refuses baseline features there)."""
    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # NumPy 1.x
        umath = importlib.import_module("numpy.core._multiarray_umath")
    found = umath.__cpu_features__
    return [name for name in umath.__cpu_dispatch__ if found.get(name)]


def environment() -> dict[str, str]:
    """The variables that put torch, BLAS and NumPy on the plainer path."""
    env = {**THREADS, **ATEN}
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        env.update(X86_KERNELS)
    elif machine in ("aarch64", "arm64"):
        env.update(ARM_KERNELS)
    features = numpy_dispatch_features()
    if features:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(features)
    return env


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0] + "\n\nusage: python -m evalrun.testing.other_cpu COMMAND [ARG ...] | --print",
              file=sys.stderr)
        return 2
    env = environment()
    if argv == ["--print"]:
        print("\n".join(f"{k}='{v}'" for k, v in sorted(env.items())))
        return 0
    print("evalrun.testing.other_cpu: " + " ".join(f"{k}='{v}'" for k, v in sorted(env.items())),
          file=sys.stderr, flush=True)
    os.execvpe(argv[0], argv, {**os.environ, **env})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
