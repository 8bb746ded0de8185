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
        # optional too: the fixed-key detectors (align, edit scores) fall back on the numpy
        # path of evalrun/watermark/engine/detection.py, with the same bits, more slowly.
        # -ffp-contract=off: no a * b + c may become one FMA (it rounds once, numpy twice)
        Extension("evalrun.kernels._offset_scores", ["kernels/offset_scores.c"],
                  depends=["kernels/offset_scores_body.h", "kernels/keyed_hash.h"],
                  extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
        # optional too: the logits processors' vocabulary-wide keyed work (green lists, Feistel
        # permutations, keyed noise argmax) falls back on the numpy twins of
        # kernels/vocab_rows.py, with the same results, more slowly; -ffp-contract=off as above
        Extension("evalrun.kernels._vocab_rows", ["kernels/vocab_rows.c"],
                  depends=["kernels/vocab_rows_body.h", "kernels/keyed_hash.h"],
                  extra_compile_args=["-O3", "-ffp-contract=off"], libraries=["m"],
                  optional=True),
    ],
)
