"""Import names from before the sub-package layout, kept working for packs and plugins.

Packs and third-party plugins written against evalrun 0.1 import flat modules such as
``evalrun.grading`` or ``evalrun.detection_grading``. Each old name here resolves to the module
that now holds the concept -- the same module object, so ``isinstance`` checks and registries
are shared -- without a file per old name in the tree.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Callable

#: old module -> the module that holds it now (see docs/layout.md)
MOVED: dict[str, str] = {
    "evalrun.registry": "evalrun._util.registry",
    "evalrun.specs": "evalrun._util.specs",
    "evalrun.hashing": "evalrun._util.hashing",
    "evalrun.jsonl": "evalrun._util.jsonl",
    "evalrun.errors": "evalrun._util.errors",
    "evalrun.provenance": "evalrun._util.provenance",
    "evalrun.token_lines": "evalrun._util.token_lines",
    "evalrun.grading": "evalrun.pack.grade",
    "evalrun.detection_grading": "evalrun.pack.detection_grader",
    "evalrun.providers": "evalrun.model.providers",
    "evalrun.tokenization": "evalrun.model.tokenization",
    "evalrun.embedded": "evalrun.model.embedded",
    "evalrun.embeddings": "evalrun.model.embeddings",
    "evalrun.generation": "evalrun.model.generation",
    "evalrun.allocator": "evalrun.model.allocator",
    "evalrun.checkpointer": "evalrun.store.checkpointer",
    "evalrun.commit_batch": "evalrun.store.commit_batch",
    "evalrun.options": "evalrun.run.options",
    "evalrun.plan": "evalrun.run.plan",
    "evalrun.executors": "evalrun.run.executors",
    "evalrun.ray_executor": "evalrun.run.ray_executor",
    "evalrun.generation_phase": "evalrun.run.stages.generate",
    "evalrun.transform_phase": "evalrun.run.stages.transform",
    "evalrun.transform_tasks": "evalrun.run.stages.transform_tasks",
    "evalrun.judge_phase": "evalrun.run.stages.judge",
    "evalrun.grading_phase": "evalrun.run.stages.grade",
    "evalrun.regrade": "evalrun.run.regrade",
    "evalrun.stats": "evalrun.metrics.stats",
    "evalrun.pairwise_results": "evalrun.metrics.pairwise",
    "evalrun.quality_records": "evalrun.metrics.quality_records",
    "evalrun.waterbench": "evalrun.metrics.waterbench",
    "evalrun.tune": "evalrun.analysis.tune",
    "evalrun.sweep": "evalrun.analysis.sweep",
    "evalrun.distinguish": "evalrun.analysis.distinguish",
    "evalrun.detect": "evalrun.cli.detect",
    "evalrun.export": "evalrun.report.export",
    # the flat watermark folder (before engine/ and schemes/)
    **{f"evalrun.watermark.{name}": f"evalrun.watermark.engine.{name}" for name in (
        "detection", "processing", "nulls", "randomness", "scores", "sampler", "counting", "buffers",
        "seed_tables", "mask_tables", "membership_memo", "markllm_compat")},
    **{f"evalrun.watermark.{name}": f"evalrun.watermark.schemes.{name}" for name in (
        "kgw", "kgw_compat", "exponential", "binary", "inverse_transform", "unigram", "waterfall", "synthid",
        "permute_flip", "dipmark", "unbiased", "morphmark", "exp_gumbel", "entropy_green", "sweet", "ewd")},
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name and hands back the module now holding it."""

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module is already executed under its new name."""


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` once (``import evalrun`` does this)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())


def forward(target: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that reads names from ``target`` on first use: a package that
    replaced a flat module of the same name (``evalrun.store``, ``evalrun.pack``,
    ``evalrun.cli``) keeps answering the old module's names without importing it eagerly."""
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(target), name)

    return __getattr__
