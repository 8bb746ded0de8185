"""The SQLite results store: schema and migrations (:mod:`.database`), write-ahead-log
checkpoints (:mod:`.checkpointer`) and grouped commits (:mod:`.commit_batch`)."""

from evalrun._util.legacy import forward

#: ``from evalrun.store import Store`` and the other names of the former flat module
__getattr__ = forward("evalrun.store.database")
