"""WaterDrum: owner-keyed Waterfall data, the ``waterdrum`` pack's grader and
aggregates, fine-tuning and unlearning on CPU, ``evalrun unlearning demo`` and ``compare``.

Modules: :mod:`.keys` (owner -> Waterfall id), :mod:`.owner_watermarks` (watermarks adapted
to many owners: each scheme's owner keys and value, Table 4's methods), :mod:`.grading` (the
pure grader),
:mod:`.aggregates` (per-model forget/retain scores, D1 AUROC, D2 R^2, scaling to the
original model), :mod:`.baselines` (ROUGE-L and MIA scores in the same shape), :mod:`.data`
(owners' files and ``evalrun watermark-data``), :mod:`.finetune` (torch training and the
two unlearning algorithms), :mod:`.similarity` (D4's data-similarity settings), :mod:`.demo`
(the whole experiment), :mod:`.compare` (WaterDrum against the baselines and with other
watermarks, Tables 2, 3 and 4, and the unlearning algorithms of Fig. 4),
:mod:`.cli` (commands).
"""
