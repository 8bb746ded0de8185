"""Where the embedded offline default model ships inside the evalrun package."""

from __future__ import annotations

import pathlib
from importlib import resources

from evalrun._util.errors import EvalrunError

#: name of the shipped model (directory under ``evalrun/assets/embedded/``)
EMBEDDED_NAME = "austen-5m"
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")


def embedded_model_path() -> pathlib.Path:
    """Directory of the embedded model, loadable with ``from_pretrained``.

    Raises :class:`EvalrunError` when the weights are missing (e.g. a source checkout where
    ``scripts/train_embedded_model.py`` has not been run or the files were stripped).
    """
    path = pathlib.Path(str(resources.files("evalrun") / "assets" / "embedded" / EMBEDDED_NAME))
    missing = [name for name in _REQUIRED if not (path / name).is_file()]
    if missing:
        raise EvalrunError(
            f"embedded model {EMBEDDED_NAME!r} is missing {', '.join(missing)} in {path}; "
            "reinstall evalrun or rebuild it with `python scripts/train_embedded_model.py`"
        )
    return path
