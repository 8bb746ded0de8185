"""``evalrun view``: a local, read-only web viewer of a results store (read side only: it
imports nothing of the run stages).

:mod:`~evalrun.view.queries` reads the store (paged and filtered in SQL),
:mod:`~evalrun.view.evidence` computes a text's token evidence with the key,
:mod:`~evalrun.view.charts` takes the report's benchmark numbers,
:mod:`~evalrun.view.pages` renders HTML and :mod:`~evalrun.view.server` serves it all.
"""
