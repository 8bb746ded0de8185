"""Stores with known contents for the report and export tests, written through the public
Store API (start_run, store_generation, record_grade) exactly as a run writes them."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from evalrun.store.database import GENERATION_COLUMNS, GradeRecord, Store

PAYLOAD = ("<script>document.title='PWNED'</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">")

FAMILIES = ("rewrite", "summarize", "format_convert", "style_transfer")
SCHEMES = ("acrostic", "index_of_word", "punctuation_mapping", "no_message_control",
           "noise_variant")

WR_CASES = [f"wr_{fam}_{k}" for fam in FAMILIES for k in (1, 2)]            # 8 cases
HME_CASES = [f"hme_{sch}_{k}" for sch in SCHEMES for k in (1, 2)]          # 10 cases

REFERENCE = "reference"
MODEL_A = "openai:model-a"
MODEL_B = "replay:outputs/model-b.jsonl"


def wr_case(cid: str) -> dict[str, Any]:
    fam = cid.split("_", 1)[1].rsplit("_", 1)[0]
    mark = "WMID:" + (cid.encode().hex() * 4)[:32]
    instruction = f"Rewrite the passage ({fam})."
    if cid == "wr_rewrite_2":
        instruction += " " + PAYLOAD  # case text must be escaped too
    return {"id": cid, "family": fam, "passage": f"Some text {mark} more text.",
            "instruction": instruction, "watermark": mark}


def hme_case(cid: str) -> dict[str, Any]:
    sch = cid.split("_", 1)[1].rsplit("_", 1)[0]
    expected = "NONE" if sch == "no_message_control" else "HELLO"
    return {"id": cid, "scheme": sch, "text": "Hold each line loosely, old friend.",
            "rule": "Take the first letter of each word.", "expected": expected}


# (label, score) per (model, case, repetition); None means the generation errored
Outcome = tuple[str, float] | None


def wr_outcome(model: str, cid: str, rep: int) -> Outcome:
    ok = ("PASS", 1.0)
    if model == MODEL_A:
        if cid in ("wr_rewrite_2", "wr_format_convert_1"):
            return ("DROPPED", 0.0)
        if cid == "wr_summarize_2":
            return ("MUTATED", 0.25) if rep == 0 else ok          # flips
        if cid == "wr_style_transfer_1" and rep == 2:
            return None                                           # one generation error
    if model == MODEL_B:
        if cid in ("wr_rewrite_1", "wr_summarize_1", "wr_format_convert_1"):
            return ("DROPPED", 0.0)
        if cid == "wr_style_transfer_2":
            return ("MUTATED", 0.5)
        if cid == "wr_rewrite_2":
            return ("DROPPED", 0.0) if rep == 1 else ok          # flips
    return ok


def hme_outcome(model: str, cid: str, rep: int) -> Outcome:
    ok = ("CORRECT", 1.0)
    sch = cid.split("_", 1)[1].rsplit("_", 1)[0]
    if model == MODEL_A:
        if sch == "noise_variant":
            return ("PARTIAL", 0.5)
        if cid == "hme_no_message_control_1":
            return ("FALSE_POSITIVE", 0.0)
        if cid == "hme_acrostic_1" and rep == 1:
            return ("INCORRECT", 0.0)                             # flips
    if model == MODEL_B:
        if sch == "punctuation_mapping":
            return ("INCORRECT", 0.0)
        if sch == "no_message_control" and rep == 0:
            return ("FALSE_POSITIVE", 0.0)                        # flips
        if cid == "hme_index_of_word_2":
            return ("PARTIAL", 0.5)
    return ok


def output_for(pack: str, case: dict[str, Any], outcome: Outcome, model: str) -> str:
    if pack == "hidden_message_extraction":
        if model == MODEL_B and case["id"] == "hme_punctuation_mapping_1":
            return PAYLOAD
        return {"CORRECT": case["expected"], "PARTIAL": "HEL", "INCORRECT": "WORLD",
                "FALSE_POSITIVE": "SECRET"}.get(outcome[0] if outcome else "", "")
    if pack != "watermark_robustness":
        return f"answer {outcome[0] if outcome else ''}"
    mark = case["watermark"]
    label = outcome[0] if outcome else ""
    if label == "PASS":
        return f"Rewritten text keeping {mark}."
    if label == "MUTATED":
        return f"Kept {mark} and {mark}." if outcome[1] == 0.5 else "Kept WMID:" + "0" * 32
    return "Rewritten text without the marker."


@dataclass
class Fixture:
    db: Path
    run_ids: list[str]
    n: int
    models: list[str]
    expected: dict[tuple[str, str], Counter] = field(default_factory=dict)  # (pack, model) -> labels
    errors: Counter = field(default_factory=Counter)                        # (pack, model) -> n


def write_store(path: Path, models: list[str], n: int = 3,
                outcome: Callable[[str, str, str, int], Outcome] | None = None,
                extra_pack: bool = False,
                variants: tuple[tuple[str, str], ...] = (("none", "none"),),
                ungraded: int = 0) -> Fixture:
    """Two runs: run-wr holds watermark_robustness, run-hme hidden_message_extraction (and the
    toy generic pack when ``extra_pack``). Each model runs under every (watermark, attack) of
    ``variants``; the last ``ungraded`` generations written are left without a grade."""
    def default(pack: str, model: str, cid: str, rep: int) -> Outcome:
        return (wr_outcome if pack == "watermark_robustness" else hme_outcome)(model, cid, rep)

    decide = outcome or default
    fx = Fixture(db=path, run_ids=["run-wr", "run-hme"], n=n, models=models)
    store = Store(path)
    plan = [("run-wr", "watermark_robustness", WR_CASES, wr_case, "family"),
            ("run-hme", "hidden_message_extraction", HME_CASES, hme_case, "scheme")]
    if extra_pack:
        plan.append(("run-hme", "toy_pack", [f"toy_{k}" for k in range(4)],
                     lambda cid: {"id": cid, "prompt": f"say {cid}", "answer": cid}, None))
    for k, run_id in enumerate(fx.run_ids):
        store.start_run(run_id, {"started_at": f"2026-01-0{k + 1}T00:00:00+00:00",
                                 "git_sha": f"{k + 1:040x}", "git_dirty": k,
                                 "evalrun_version": "0.1.0", "python": "3.11.2",
                                 "platform": "linux", "argv": ["evalrun", "run"]},
                        {"seed": 7})
    for run_id, pack, cases, make_case, group in plan:
        pending: list[tuple[int, tuple[str, float], str]] = []
        for model, (wm, attack) in [(m, v) for m in models for v in variants]:
            for cid in cases:
                case = make_case(cid)
                for rep in range(n):
                    if pack == "toy_pack":
                        oc: Outcome = (("GOOD", 1.0) if (int(cid[-1]) + rep) % 3 else ("BAD", 0.2))
                    else:
                        oc = decide(pack, model, cid, rep)
                    timed = model.startswith("openai:")
                    row = {
                        "run_id": run_id, "pack": pack, "case_id": cid, "model": model,
                        "params_json": json.dumps({"temperature": 0.0}), "watermark": wm,
                        "attack": attack, "repetition": rep,
                        "prompt_json": json.dumps([{"role": "user", "content": cid}]),
                        "raw_output": None if oc is None else output_for(pack, case, oc, model),
                        "output_tokens_json": None,
                        "latency_ms": (100.0 + 10 * rep + len(cid)) if timed else None,
                        "tokens_in": (50 + len(cid)) if timed else None,
                        "tokens_out": (5 + rep) if timed else None,
                        "error": "TimeoutError: provider timed out" if oc is None else None,
                        "created_at": "2026-01-01T00:00:00+00:00",
                        "item_key": f"{pack}|{cid}|{model}|{wm}|{attack}|{rep}",
                        "gen_key": f"{pack}|{cid}|{model}|{wm}|{rep}",
                        "case_json": json.dumps(case),
                        "group_value": case.get(group) if group else None,
                        "served_model": model.split(":", 1)[-1] if timed else None,
                        "retries": 0, "tokenizer_hash": None, "extra_json": None,
                    }
                    assert set(row) == set(GENERATION_COLUMNS)
                    [rid] = store.store_generation([row], run_id)
                    if oc is None:
                        fx.errors[(pack, model)] += 1
                        continue
                    fx.expected.setdefault((pack, model), Counter())[oc[0]] += 1
                    pending.append((rid, oc, row["raw_output"]))
        for rid, oc, text in pending[:len(pending) - ungraded]:
            store.record_grade(GradeRecord(rid, oc[1], oc[0], f"graded {oc[0]}", "gh", text))
        store.finish_run(run_id)
    store.close()
    return fx


@pytest.fixture(scope="session")
def three_model_store(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    path = tmp_path_factory.mktemp("store3") / "results.sqlite"
    return write_store(path, [REFERENCE, MODEL_A, MODEL_B], n=3, extra_pack=True)


@pytest.fixture(scope="session")
def three_model_report(three_model_store: Fixture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evalrun.report import build_report

    out = tmp_path_factory.mktemp("report3")
    md = build_report(three_model_store.db, out)
    assert md == out / "report.md"
    return out


def parse_md_tables(text: str) -> dict[str, list[list[dict[str, str]]]]:
    """Markdown pipe tables of report.md grouped by the heading they sit under; each table is
    a list of {header: cell} rows with Markdown escaping undone, and a ``watermark`` cell that
    shows a short name read back as the full spec through the report's names table."""
    import re

    from evalrun.report.document import md_unescape

    def cells(line: str) -> list[str]:
        parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        return [md_unescape(p.strip()) for p in parts]

    out: dict[str, list[list[dict[str, str]]]] = {}
    heading = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|"):
            header = cells(line)
            rows = []
            i += 2  # skip the alignment row
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(header, cells(lines[i]))))
                i += 1
            out.setdefault(heading, []).append(rows)
            continue
        i += 1
    named = [t for ts in out.values() for t in ts if t and list(t[0]) == ["watermark", "spec"]]
    specs = {row["watermark"]: row["spec"] for t in named for row in t}
    for ts in out.values():
        for t in ts:
            if t not in named:
                for row in t:
                    if row.get("watermark") in specs:
                        row["watermark"] = specs[row["watermark"]]
    return out


@pytest.fixture(scope="session")
def md_tables() -> Callable[[str], dict[str, list[list[dict[str, str]]]]]:
    return parse_md_tables


@pytest.fixture(scope="session")
def payload() -> str:
    return PAYLOAD


@pytest.fixture(scope="session")
def store_writer() -> Callable[..., Fixture]:
    return write_store


# -- a watermark benchmark store (MarkMyWords): detection grades with evidence, judge answers --

BENCH_MODEL = "hf:tiny"
KGW = "kgw:gamma=0.5,delta=2"
EXP = "exp:randomness=window,context=3"
BENCH_ATTACKS = ("none", "swap:p=0.1", "synonym:p=0.25", "translate:fr:openai:tr", "paraphrase:openai:para")
BENCH_CASES = [f"c{i:02d}" for i in range(8)]
JUDGE = "openai:judge-model"
SCORER = "embedded"
#: per attack: (share of watermarked texts still detected, quality kept)
ATTACK_EFFECT = {"none": (1.0, 1.0), "swap:p=0.1": (0.375, 0.9), "synonym:p=0.25": (0.5, 0.5),
                 "translate:fr:openai:tr": (0.625, 0.85), "paraphrase:openai:para": (0.0, 1.0)}
BASE_QUALITY = {KGW: 0.80, EXP: 0.78, "none": 0.82}


def bench_evidence(wm: str, attack: str, i: int) -> dict[str, Any]:
    """Detection evidence of case ``i``'s watermarked text: the first share of cases is
    detected; EXP misses two unattacked texts entirely (size None)."""
    share, _ = ATTACK_EFFECT[attack]
    detected = i < round(share * len(BENCH_CASES)) and not (wm == EXP and attack == "none" and i >= 6)
    p = 10.0 ** -(3 + i % 4) if detected else 0.3 + 0.05 * i
    size = (12 + 5 * i if wm == KGW else 20 + 7 * i) if detected else None
    return {"p_value": p, "z_score": 4.0 if wm == KGW else None, "score": 1.0, "num_tokens_scored": 60 + i,
            "size": size, "sizes": {"alpha_spending": size, "first_crossing": size}, "detected": p <= 0.02}


def bench_quality(wm: str, attack: str, i: int) -> float:
    """A rating with two decimals (parsed exactly from "Grade: NN")."""
    return round(BASE_QUALITY[wm] * ATTACK_EFFECT[attack][1] + 0.01 * (i % 3 - 1), 2)


def write_benchmark_store(path: Path, packs: dict[str, str]) -> Path:
    """One run over ``packs`` (name -> quality judge: ``rating``, ``perplexity`` or ``none``):
    model BENCH_MODEL, watermarks KGW, EXP and none, the attacks of BENCH_ATTACKS, cases
    at temperature 0.7 (even) and 1.0 (odd), graded as the detection grader grades."""
    store = Store(path)
    run_id = "run-bench"
    store.start_run(run_id, {"started_at": "2026-02-01T00:00:00+00:00", "git_sha": "b" * 40, "git_dirty": 0,
                             "evalrun_version": "0.1.0", "python": "3.11.2", "platform": "linux",
                             "argv": ["evalrun", "run"]}, {"seed": 7})
    for pack, judge in packs.items():
        for wm in (KGW, EXP, "none"):
            for attack in BENCH_ATTACKS:
                for i, cid in enumerate(BENCH_CASES):
                    temperature = 0.7 if i % 2 == 0 else 1.0
                    item_key = f"{pack}|{cid}|{wm}|{attack}"
                    row = {
                        "run_id": run_id, "pack": pack, "case_id": cid, "model": BENCH_MODEL,
                        "params_json": json.dumps({"temperature": temperature, "max_tokens": 64, "seed": 0}),
                        "watermark": wm, "attack": attack, "repetition": 0,
                        "prompt_json": json.dumps({"user": f"Write a story {cid}."}),
                        "raw_output": f"story {cid} under {wm}", "output_tokens_json": json.dumps([1, 2, 3]),
                        "latency_ms": None, "tokens_in": None, "tokens_out": None, "error": None,
                        "created_at": "2026-02-01T00:00:00+00:00", "item_key": item_key,
                        "gen_key": f"{pack}|{cid}|{wm}", "case_json": json.dumps({"id": cid, "prompt": "story"}),
                        "group_value": None, "served_model": None, "retries": 0, "tokenizer_hash": "t",
                        "extra_json": None,
                    }
                    [rid] = store.store_generation([row], run_id)
                    if wm == "none":
                        # one false positive: case 3, unattacked, under KGW's detector
                        ps = {spec: 0.01 if (spec, attack, i) == (KGW, "none", 3) else 0.2 + 0.1 * i
                              for spec in (KGW, EXP)}
                        found = {spec: {"p_value": p, "z_score": None, "score": 0.0, "num_tokens_scored": 60 + i,
                                        "size": None, "detected": p <= 0.02,
                                        "sizes": {"alpha_spending": None,
                                                  "first_crossing": 30 if p <= 0.02 else None}}
                                 for spec, p in ps.items()}
                        fired = any(ev["detected"] for ev in found.values())
                        meta = {"threshold": 0.02, "detections": found}
                    else:
                        meta = {**bench_evidence(wm, attack, i), "threshold": 0.02}
                        fired = meta["detected"]
                    label = "DETECTED" if fired else "NOT_DETECTED"
                    store.record_grade(GradeRecord(rid, float(fired), label, f"graded {label}", "gh",
                                                   row["raw_output"] if attack != "none" else None,
                                                   metadata_json=json.dumps(meta)))
                    if judge == "none":
                        continue
                    q = bench_quality(wm, attack, i)
                    if judge == "rating":
                        raw, method, who = f"Grade: {round(q * 100)}", "rating", JUDGE
                    else:
                        raw, method, who = json.dumps({"perplexity": 1 / q, "tokens": 40, "scorer": SCORER}), \
                            "perplexity", SCORER
                    store.store_judgement({
                        "judgement_key": f"j|{method}|{item_key}", "judge": who, "method": method,
                        "subjects_json": json.dumps([item_key]), "prompt_json": "{}", "raw_answer": raw,
                        "error": None, "run_id": run_id, "created_at": "2026-02-01T00:00:00+00:00"}, [item_key])
    store.finish_run(run_id)
    store.close()
    return path


@pytest.fixture(scope="session")
def benchmark_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report over two detection packs with names the report does not know: one judged by
    the seed's rating, one by the perplexity proxy only."""
    from evalrun.report import build_report

    root = tmp_path_factory.mktemp("bench")
    db = write_benchmark_store(root / "bench.sqlite", {"story_detect": "rating", "news_detect": "perplexity"})
    build_report(db, root / "report")
    return root / "report"


@pytest.fixture(scope="session")
def bench() -> Any:
    """The benchmark store's names and writer, for tests (conftest is not importable)."""
    from types import SimpleNamespace

    return SimpleNamespace(model=BENCH_MODEL, kgw=KGW, exp=EXP, judge=JUDGE, scorer=SCORER,
                           write=write_benchmark_store)


# -- a store shaped like the README's main job (mmw_book_reports: none, kgw and exp with every --
# -- parameter in their specs, the quick attack suite, the perplexity proxy) ---------------------

MAIN_EXP = "exp:context=1,randomness=window,repeats=ignore,score=sum,skip=0.0"
MAIN_KGW = "kgw:context=1,delta=2.0,gamma=0.25,randomness=window,repeats=ignore,score=sum,skip=0.0"
MAIN_ATTACKS = ("none", "contraction", "lowercase", "misspelling:p=0.25", "swap:p=0.1", "synonym:p=0.5",
                "typo:p=0.05")


def write_main_job_store(path: Path, cases: int) -> Path:
    """``cases`` book reports under none, MAIN_KGW and MAIN_EXP and each of MAIN_ATTACKS, graded
    with the detection grader's reasons and evidence (per detector for unwatermarked texts, one
    false positive in ten under KGW), with perplexity-proxy answers: 21 results per case, as the
    main job's 2,100 for 100 cases."""
    store = Store(path)
    run_id = "run-main"
    store.start_run(run_id, {"started_at": "2026-03-01T00:00:00+00:00", "git_sha": "c" * 40, "git_dirty": 0,
                             "evalrun_version": "0.1.0", "python": "3.11.2", "platform": "linux",
                             "argv": ["evalrun", "run", "--pack", "mmw_book_reports"]}, {"seed": 0})
    for i in range(cases):
        cid = f"book-{i + 1:03d}"
        case = {"id": cid, "task": "book_report", "title": f"Book {i}", "author": f"Author {i % 7}"}
        for wm in ("none", MAIN_KGW, MAIN_EXP):
            for k, attack in enumerate(MAIN_ATTACKS):
                item_key = f"{cid}|{wm}|{attack}"
                text = f"A report on book {i} under {wm}, attacked by {attack}. " * 12
                row = {
                    "run_id": run_id, "pack": "mmw_book_reports", "case_id": cid, "model": "embedded",
                    "params_json": json.dumps({"max_tokens": 200, "seed": 0, "temperature": 1.0}),
                    "watermark": wm, "attack": attack, "repetition": 0,
                    "prompt_json": json.dumps({"user": f"Write a book report about 'Book {i}'."}),
                    "raw_output": text, "output_tokens_json": json.dumps(list(range(180))),
                    "latency_ms": 50.0, "tokens_in": 20, "tokens_out": 180, "error": None,
                    "created_at": "2026-03-01T00:00:00+00:00", "item_key": item_key, "gen_key": f"{cid}|{wm}",
                    "case_json": json.dumps(case), "group_value": "book_report", "served_model": None,
                    "retries": 0, "tokenizer_hash": "t", "extra_json": None,
                }
                [rid] = store.store_generation([row], run_id)
                tokens = 40 + (7 * i + 3 * k) % 160
                if wm == "none":
                    false_positive = (i + k) % 10 == 0
                    found = {spec: {"detected": spec == MAIN_KGW and false_positive,
                                    "num_tokens_scored": tokens,
                                    "p_value": 0.011 if spec == MAIN_KGW and false_positive else 0.25 + 0.007 * i,
                                    "score": 53.0 + i, "size": None, "z_score": 0.7 + 0.01 * k,
                                    "sizes": {"alpha_spending": None,
                                              "first_crossing": 9 if spec == MAIN_KGW and false_positive else None}}
                             for spec in (MAIN_EXP, MAIN_KGW)}
                    meta: dict[str, Any] = {"detections": found, "threshold": 0.02}
                    label = "DETECTED" if false_positive else "NOT_DETECTED"
                    reason = f"false positive under {MAIN_KGW}" if false_positive \
                        else "not detected under 2 watermark(s)"
                else:
                    p = 10.0 ** -(20 + (i * 7 + k) % 30) * 1.2345
                    meta = {"detected": True, "num_tokens_scored": tokens, "p_value": p, "score": 180.123 + i,
                            "size": 2 + k % 5, "threshold": 0.02, "z_score": 13.449853185988228 if wm == MAIN_KGW
                            else None, "sizes": {"alpha_spending": 2 + k % 5, "first_crossing": 2 + k % 5}}
                    label, reason = "DETECTED", f"p = {p:.3g} over {tokens} tokens (<= 0.02)"
                store.record_grade(GradeRecord(rid, float(label == "DETECTED"), label, reason, "gh",
                                               text if attack != "none" else None, metadata_json=json.dumps(meta)))
                answer = {"perplexity": 20.0 + (i + k) % 9 + (5 if wm == MAIN_KGW else 0), "scorer": "embedded",
                          "tokens": tokens}
                store.store_judgement({
                    "judgement_key": f"j|perplexity|{item_key}", "judge": "embedded", "method": "perplexity",
                    "subjects_json": json.dumps([item_key]), "prompt_json": "{}", "raw_answer": json.dumps(answer),
                    "error": None, "run_id": run_id, "created_at": "2026-03-01T00:00:00+00:00"}, [item_key])
    store.finish_run(run_id)
    store.close()
    return path


@pytest.fixture(scope="session")
def main_job_store() -> Callable[[Path, int], Path]:
    """The writer of a store shaped like the README's main job (:func:`write_main_job_store`)."""
    return write_main_job_store
