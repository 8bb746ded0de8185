"""WaterDrum: owner-keyed Waterfall data, the ``waterdrum`` pack's grader and
aggregates, fine-tuning and unlearning on CPU, and ``evalrun unlearning demo``.

Modules: :mod:`.keys` (owner -> Waterfall id), :mod:`.grading` (the pure grader),
:mod:`.aggregates` (per-model forget/retain scores, D1 AUROC, D2 R^2, scaling to the
original model), :mod:`.baselines` (ROUGE-L and MIA scores in the same shape), :mod:`.data`
(owners' files and ``evalrun watermark-data``), :mod:`.finetune` (torch training and the
two unlearning algorithms), :mod:`.demo` (the whole experiment), :mod:`.cli` (commands).
"""
