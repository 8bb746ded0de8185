"""Distinguishability (Singh & Zou, appendix B): the classifiers on synthetic embeddings whose
classes are separable or not, the embeddings cache, the three kinds of embedder, and
``evalrun distinguish`` on the embedded model's outputs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from evalrun._util.errors import EvalrunError
from evalrun.analysis.distinguish import CLASSIFIERS, CVSettings, Fitted, MLPSettings, cross_validate
from evalrun.model.providers import parse_model
from evalrun.testing.chat_server import ChatServer

FAST_MLP = MLPSettings(epochs=40)


def _blobs(n: int, shift: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.array([0, 1] * (n // 2))
    x = rng.normal(size=(n, 24))
    x[:, 0] += shift * y
    return x, y


def test_separable_classes_come_out_near_auc_1() -> None:
    x, y = _blobs(80, shift=6.0)
    out = cross_validate(x, y, settings=CVSettings(mlp=FAST_MLP))
    for name in ("logreg", "mlp"):
        assert out[name]["roc_auc"]["mean"] > 0.97 and out[name]["accuracy"]["mean"] > 0.9
        assert len(out[name]["roc_auc"]["folds"]) == 5 and sum(out[name]["fold_sizes"]) == 80


def test_a_registered_classifier_is_cross_validated_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Classifiers are a registry: a new one needs no change to the cross-validation."""
    seen: list[int] = []

    def first_coordinate(x_train, y_train, x_test, seed, settings) -> Fitted:
        seen.append(seed)
        return Fitted(1 / (1 + np.exp(-x_test[:, 0])), {"feature": 0})

    monkeypatch.setitem(CLASSIFIERS._objects, "first_coordinate", first_coordinate)
    x, y = _blobs(80, shift=6.0)
    out = cross_validate(x, y, settings=CVSettings(classifiers=("first_coordinate",), seed=2))
    assert list(out) == ["first_coordinate"] and seen == [2000, 2001, 2002, 2003, 2004]
    assert out["first_coordinate"]["roc_auc"]["mean"] > 0.97
    assert out["first_coordinate"]["mlp_settings"] == [{"feature": 0}] * 5
    with pytest.raises(EvalrunError, match="--classifier svm: unknown; known: first_coordinate, logreg, mlp"):
        cross_validate(x, y, settings=CVSettings(classifiers=("svm",)))


def test_indistinguishable_classes_come_out_near_auc_half() -> None:
    x, y = _blobs(160, shift=0.0, seed=3)
    out = cross_validate(x, y, settings=CVSettings(mlp=FAST_MLP))
    for name in ("logreg", "mlp"):
        assert abs(out[name]["roc_auc"]["mean"] - 0.5) < 0.15
        assert abs(out[name]["accuracy"]["mean"] - 0.5) < 0.15


def test_cross_validation_is_seeded_and_keeps_groups_in_one_fold() -> None:
    x, y = _blobs(60, shift=1.0)
    groups = [f"case{i // 2}" for i in range(60)]  # a case's two texts, one of each class
    a = cross_validate(x, y, groups, settings=CVSettings(mlp=FAST_MLP, seed=4))
    b = cross_validate(x, y, groups, settings=CVSettings(mlp=FAST_MLP, seed=4))
    assert a == b
    from sklearn.model_selection import StratifiedGroupKFold

    codes = np.arange(60) // 2
    for _, test in StratifiedGroupKFold(5, shuffle=True, random_state=4).split(x, y, codes):
        assert set(codes[test]).isdisjoint(set(codes) - set(codes[test]))
    assert a["logreg"]["fold_sizes"] == [len(t) for _, t in
                                         StratifiedGroupKFold(5, shuffle=True, random_state=4).split(x, y, codes)]


def test_too_few_texts_are_refused() -> None:
    from evalrun._util.errors import EvalrunError

    with pytest.raises(EvalrunError, match="needs at least 5 texts of each class"):
        cross_validate(np.zeros((6, 3)), np.array([0, 1, 0, 1, 0, 1]))


def _analyses(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    try:
        return [json.loads(r) for (r,) in conn.execute("SELECT result_json FROM analyses WHERE kind = 'distinguish'")]
    finally:
        conn.close()


def test_distinguish_on_the_embedded_models_outputs(store_copy: Path, capsys) -> None:
    from evalrun.cli.main import main

    db = store_copy
    args = ["distinguish", "--db", str(db), "--epochs", "10"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "5-fold mean ± sd" in out and "(60 texts newly embedded)" in out
    [result] = _analyses(db)
    assert result["embedder"] == "embedded" and result["dim"] == 256 and result["n"] == 60
    assert result["n_watermarked"] == result["n_unwatermarked"] == 30
    for name in ("logreg", "mlp"):
        m = result["classifiers"][name]
        assert 0.0 <= m["roc_auc"]["min"] <= m["roc_auc"]["mean"] <= m["roc_auc"]["max"] <= 1.0
        assert len(m["accuracy"]["folds"]) == 5
    # the second time every embedding comes from the cache, and the analysis replaces itself
    assert main([*args, "--classifier", "logreg"]) == 0 and "(0 texts newly embedded)" in capsys.readouterr().out
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT embedder), MIN(dim) FROM embeddings").fetchone() == (
            60, 1, 256)
    finally:
        conn.close()
    assert len(_analyses(db)) == 2  # the same data with other settings is another analysis
    assert main([*args, "--classifier", "logreg"]) == 0 and len(_analyses(db)) == 2  # the same replaces itself


def test_an_openai_compatible_embedder_and_the_cache_key(store_copy: Path, capsys) -> None:
    from evalrun.cli.main import main

    with ChatServer() as server:
        assert main(["distinguish", "--db", str(store_copy), "--embedder", "openai:embed-model", "--base-url",
                     server.base_url, "--classifier", "logreg"]) == 0
        assert server.texts_embedded == 60
        assert main(["distinguish", "--db", str(store_copy), "--embedder", "openai:embed-model", "--base-url",
                     server.base_url, "--classifier", "logreg"]) == 0
        assert server.texts_embedded == 60  # cached: keyed by text and embedder (model and endpoint)
    capsys.readouterr()
    [result] = _analyses(store_copy)
    assert result["dim"] == 32 and result["embedder_identity"].startswith("openai:embed-model|http://127.0.0.1:")
    assert set(result["classifiers"]) == {"logreg"}


def test_an_hf_encoder_embeds_like_the_provider(tmp_path: Path) -> None:
    from evalrun.model.embedded import embedded_model_path
    from evalrun.model.providers import make_provider

    texts = ["It is a truth universally acknowledged.", "Emma Woodhouse, handsome, clever, and rich."]
    encoder = make_provider(parse_model(f"hf:{embedded_model_path()}"), task="embed")
    provider = make_provider(parse_model("embedded"))
    try:
        a, b = encoder.embed(texts), provider.embed(texts)
    finally:
        encoder.close()
        provider.close()
    assert a.shape == (2, 256) and np.allclose(a, b, atol=1e-5) and not np.allclose(a[0], a[1])
