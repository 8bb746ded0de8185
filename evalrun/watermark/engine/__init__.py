"""The machinery every scheme shares, apart from the schemes themselves.

* the native engine (MarkMyWords section VII): :mod:`.native` combines a randomness source
  (:mod:`.randomness`), a sampling algorithm (:mod:`.sampler`) and a score (:mod:`.scores`);
* detection (:mod:`.detection`, batched, per prefix), exact and permutation nulls
  (:mod:`.nulls`) and repeat counting (:mod:`.counting`);
* generation: the logits processors (:mod:`.processing`) with their step buffers
  (:mod:`.buffers`);
* memos of per-seed work: seed tables (:mod:`.seed_tables`), packed green-mask tables
  (:mod:`.mask_tables`), membership memos (:mod:`.membership_memo`);
* MarkLLM compatibility keys (:mod:`.markllm_compat`).

Nothing here is imported on ``import evalrun.watermark``; the schemes import what they use.
"""

from typing import Any

from evalrun._util.legacy import forward

#: what ``evalrun.watermark.engine`` held when it was one module (now :mod:`.native`)
_NATIVE_NAMES = frozenset({"NativeScheme", "build_native", "Sampler"})
_native = forward("evalrun.watermark.engine.native")


def __getattr__(name: str) -> Any:
    if name in _NATIVE_NAMES:
        return _native(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
