"""Builds the optional compiled kernel; everything else is configured in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # optional: without a C compiler the install goes on and evalrun uses the numpy twin
        # of this kernel (kernels/fisher_yates.py), with the same results, more slowly
        Extension("evalrun.kernels._fisher_yates", ["kernels/fisher_yates.c"],
                  depends=["kernels/fisher_yates_trace.h"],
                  extra_compile_args=["-O3", "-Wno-psabi"], optional=True),
        # optional too: evalrun._util.token_lines falls back on numpy's parser plus its own checks
        Extension("evalrun.kernels._token_ids", ["kernels/token_ids.c"],
                  extra_compile_args=["-O3"], optional=True),
    ],
)
