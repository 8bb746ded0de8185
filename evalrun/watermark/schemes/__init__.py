"""One module per registered scheme (``--watermark <name>:...``), each with its ``build``:

native engine schemes ``kgw``, ``exp`` (:mod:`.exponential`), ``binary``, ``its``
(:mod:`.inverse_transform`); reference-compatible KGW ``kgw_compat`` (``kgw:seeding=...``);
``unigram``, ``synthid``, ``waterfall``; MarkLLM's ``dipmark``, ``unbiased``, ``pf``
(:mod:`.permute_flip`), ``morphmark``, ``exp_gumbel``, ``sweet`` and ``ewd`` (both on
:mod:`.entropy_green`). :mod:`evalrun.watermark.registry` imports a module only when its
scheme is named.
"""
