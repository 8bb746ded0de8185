"""Packs: loading and validating a pack folder (:mod:`.loading`), the grading API packs import
(:mod:`.grade`), and the graders several packs share (:mod:`.detection_grader`)."""

from evalrun._util.legacy import forward

#: ``from evalrun.pack import load_pack`` and the other names of the former flat module
__getattr__ = forward("evalrun.pack.loading")
