"""Owners' data: reading owner files, the pack's cases, and ``evalrun watermark-data``.

An owners file is JSONL, one data point per line: ``id`` (unique string), ``owner`` (a
non-negative integer, the owner's public index), ``text``; other fields (``owner_name``,
``source``) are carried along. The query of a data point is its first
:data:`PROMPT_WORDS` words (WaterDrum App. E.2 queries with "the first 50 tokens of the
training data"; our passages are 50-90 words, so 12 words leave room for the rest).

``watermark-data`` is WaterDrum's watermarking operator W(d, mu_i) (section 4, P1):
generation by a model under the owner's Waterfall perturbation -- or under the owner's key
of another scheme adapted to many owners (:mod:`evalrun.unlearning.owner_watermarks`; KGW,
SynthID, EXP-edit for WaterDrum's Table 4), by the same operator. Two modes:

* ``paraphrase`` (Waterfall's operator): the model is asked to paraphrase the text; the
  watermarked data point is its answer, queried by the answer's first words. It needs an
  instruction-following model.
* ``continue`` (the documented deviation the demo uses): the embedded 5 M-parameter Austen
  model cannot paraphrase (it has no instructions and little meaning), so the data point is
  the original's first words followed by the model's watermarked *continuation* of them;
  the query is those first words. The watermark then lives in every token after the query,
  as in a watermarked paraphrase, but the text keeps little of the original (the similarity
  figure says how little).

Every output line records the verification score and p-value under the owner's id and a
similarity figure (unigram F1 of lower-cased words against the original text after its
query words). The command is resumable: lines already in ``--out`` are kept and skipped,
a torn last line is dropped; the file must come from the same model, watermark and mode.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, cast

from evalrun._util.errors import EvalrunError
from evalrun.model.generation import GenerationRequest, GenParams, Prompt
from evalrun.model.providers import ModelSpec, check_model, make_provider
from evalrun.unlearning.keys import key_source
from evalrun.unlearning.owner_watermarks import owner_watermark

PROMPT_WORDS = 12
FORGET, RETAIN = "forget", "retain"
PARAPHRASE_SYSTEM = ("Paraphrase the user's text. Keep its meaning and length; answer with "
                     "the paraphrase only.")
_WORD = re.compile(r"[A-Za-z0-9']+")


def shipped_owners_path() -> Path:
    """The demo's owners file inside the package (see ``assets/unlearning/SOURCES.md``)."""
    from importlib import resources

    return Path(str(resources.files("evalrun") / "assets" / "unlearning" / "owners.jsonl"))


def load_owners(path: str | Path, what: str = "--owners") -> list[dict[str, Any]]:
    """The records of an owners file; errors name the file, line and field."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalrunError(f"{what} {path}: cannot read ({exc})") from None
    out, seen = [], set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{what} {path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvalrunError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise EvalrunError(f"{where}: a line must be a JSON object")
        if not isinstance(rec.get("id"), str) or not rec["id"]:
            raise EvalrunError(f"{where}: field 'id' must be a non-empty string")
        owner = rec.get("owner")
        if isinstance(owner, bool) or not isinstance(owner, int) or owner < 0:
            raise EvalrunError(f"{where}: field 'owner' must be a non-negative integer")
        if not isinstance(rec.get("text"), str) or len(rec["text"].split()) <= PROMPT_WORDS:
            raise EvalrunError(f"{where}: field 'text' must be a string of more than "
                               f"{PROMPT_WORDS} words")
        if rec["id"] in seen:
            raise EvalrunError(f"{where}: duplicate id {rec['id']!r}")
        seen.add(rec["id"])
        out.append(rec)
    if not out:
        raise EvalrunError(f"{what} {path}: no records")
    return out


def prompt_of(text: str, words: int = PROMPT_WORDS) -> str:
    """The query: the first ``words`` words of ``text``."""
    return " ".join(text.split()[:words])


def case_of(record: Mapping[str, Any], forget_owners: Iterable[int]) -> dict[str, Any]:
    """The ``waterdrum`` pack case of one (watermarked) data point."""
    case = {"id": str(record["id"]), "owner": int(record["owner"]),
            "set": FORGET if int(record["owner"]) in set(forget_owners) else RETAIN,
            "prompt": str(record.get("prompt") or prompt_of(record["text"]))}
    for extra in ("owner_name", "source"):
        if isinstance(record.get(extra), str):
            case[extra] = record[extra]
    return case


def similarity(original: str, generated: str) -> float:
    """Unigram F1 of lower-cased words (a cheap, model-free similarity figure)."""
    a = Counter(w.lower() for w in _WORD.findall(original))
    b = Counter(w.lower() for w in _WORD.findall(generated))
    common = sum((a & b).values())
    if not common:
        return 0.0
    p, r = common / sum(b.values()), common / sum(a.values())
    return 2 * p * r / (p + r)


@dataclass(frozen=True)
class Mode:
    """How a data point is handed to the model and what the watermarked point is."""

    name: str
    #: (record) -> (system prompt or None, user text)
    prompt: Callable[[Mapping[str, Any]], tuple[str | None, str]]
    #: whether the query is the original's first words (the output continues it)
    continues: bool


MODES: dict[str, Mode] = {
    "paraphrase": Mode("paraphrase", lambda r: (PARAPHRASE_SYSTEM, str(r["text"])), False),
    "continue": Mode("continue", lambda r: (None, prompt_of(str(r["text"]))), True),
}


def _read_done(out: Path, header: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Finished lines of an earlier run into ``out`` (a torn last line is dropped and the
    file rewritten without it); an error when they were made differently."""
    if not out.exists():
        return {}
    done: dict[str, dict[str, Any]] = {}
    good: list[str] = []
    for n, line in enumerate(out.read_text(encoding="utf-8").splitlines(), 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # torn by a kill: redone
        for k, v in header.items():
            if rec.get(k) != v:
                raise EvalrunError(f"--out {out}:{n}: made with {k}={rec.get(k)!r}, not {v!r}; "
                                   "use another --out or remove it")
        done[rec["id"]] = rec
        good.append(line)
    out.write_text("".join(f"{g}\n" for g in good), encoding="utf-8")
    return done


def watermark_data(records: Sequence[Mapping[str, Any]], *, model: ModelSpec, watermark: str,
                   out: str | Path, secret: str | None = None, mode: str = "paraphrase",
                   max_tokens: int = 64, temperature: float = 1.0, seed: int = 0,
                   progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Watermark each record under its owner's key of ``watermark`` (a scheme adapted to many
    owners, Waterfall by default in the commands) with ``model``; append one JSON line per
    record to ``out`` as soon as its batch ends; return all lines (old and new) in the order
    of ``records``."""
    if mode not in MODES:
        raise EvalrunError(f"--mode {mode}: unknown; known: {', '.join(sorted(MODES))}")
    marked = owner_watermark(watermark)
    scheme = marked.scheme
    check_model(model)
    spec = scheme.spec.canonical()
    header = {"model": model.identity(), "watermark": spec, "mode": mode,
              "key_source": key_source(secret), "max_tokens": max_tokens,
              "temperature": temperature, "seed": seed}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = _read_done(out, header)
    todo = [r for r in records if r["id"] not in done]
    how = MODES[mode]
    if todo:
        provider = make_provider(model)
        # duck-typed: Waterfall needs a logits provider, which exposes its vocab size (hf)
        vocab = int(cast(Any, provider).vocab_size)
        by_id = {str(r["id"]): r for r in todo}
        requests = []
        for r in todo:
            system, user = how.prompt(r)
            requests.append(GenerationRequest(
                gen_key=str(r["id"]), pack="watermark-data", case={"id": str(r["id"])},
                prompt=Prompt(system=system, user=user),
                params=GenParams(temperature=temperature, max_tokens=max_tokens, seed=seed),
                repetition=0, watermark=spec,
                key=marked.key(int(r["owner"]), secret)))
        finished = [0]
        with out.open("a", encoding="utf-8") as fh:
            def sink(req: Any, gen: Any) -> None:
                rec = by_id[req.case_id]
                if gen.error or gen.text is None:
                    raise EvalrunError(f"watermark-data: {rec['id']}: generation failed: {gen.error}")
                ids = list(gen.token_ids or [])
                value, det = marked.verify(ids, int(rec["owner"]), secret, vocab)
                query = prompt_of(rec["text"]) if how.continues else prompt_of(gen.text)
                completion = (gen.text if how.continues
                              else " ".join(gen.text.split()[PROMPT_WORDS:]))
                rest = " ".join(rec["text"].split()[PROMPT_WORDS:])
                line = {**{k: v for k, v in rec.items() if k != "text"}, **header,
                        "original": rec["text"], "prompt": query, "completion": completion,
                        "completion_token_ids": ids if how.continues else None,
                        "text": f"{query} {completion}".strip(),
                        "verification_score": value, "p_value": float(det.p_value),
                        "num_tokens_scored": int(det.num_tokens_scored),
                        "similarity": round(similarity(rest, completion), 4)}
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                fh.flush()
                done[rec["id"]] = line
                finished[0] += 1
                if progress:
                    progress(finished[0], len(todo))

            try:
                provider.generate(requests, sink)
            finally:
                provider.close()
    return [done[r["id"]] for r in records]
