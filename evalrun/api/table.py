"""Records as a list of dicts that becomes a pandas DataFrame on request."""

from __future__ import annotations

from typing import Any

from evalrun._util.errors import EvalrunError


class Table(list[dict[str, Any]]):
    """A list of records (one dict a row, the columns of docs/pipeline.md's "Export"); pandas
    stays optional: :meth:`to_pandas` needs it, nothing else does."""

    def to_pandas(self) -> Any:
        """The records as a ``pandas.DataFrame`` (columns in first-seen order)."""
        try:
            import pandas as pd
        except ImportError:
            raise EvalrunError("to_pandas() needs pandas: pip install pandas "
                               "(or evalrun's `notebook` extra: pip install \"evalrun[notebook]\")") from None
        columns = list(dict.fromkeys(k for row in self for k in row))
        return pd.DataFrame(list(self), columns=columns)
