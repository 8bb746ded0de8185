"""The viewer's JSON API and its safety, over real HTTP against a real store."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

pytestmark = pytest.mark.slow


def get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def api(url: str) -> object:
    status, _, body = get(url)
    assert status == 200, body[:300]
    return json.loads(body)


def db_rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def test_runs_and_results_pages_filters_sorts_in_sql(viewer_url: str, view_db: Path, view_kgw: str) -> None:
    runs = api(f"{viewer_url}/api/runs")
    assert isinstance(runs, list) and len(runs) == 1 and runs[0]["status"] == "finished" and runs[0]["results"] == 36
    listing = api(f"{viewer_url}/api/results?limit=10")
    assert listing["total"] == 36 and len(listing["results"]) == 10
    first = listing["results"][0]
    assert {"result_id", "pack", "case_id", "model", "watermark", "attack", "label", "score"} <= set(first)
    # a filter is the SQL answer, and pages cover the whole selection once
    (spec,), = db_rows(view_db, "SELECT DISTINCT watermark FROM results WHERE watermark != 'none'")
    marked = []
    for offset in (0, 4, 8):
        page = api(f"{viewer_url}/api/results?" + urlencode(
            {"watermark": spec, "attack": "lowercase", "limit": 4, "offset": offset}))
        marked += page["results"]
    assert len(marked) == 9 and len({r["result_id"] for r in marked}) == 9
    assert all(r["attack"] == "lowercase" and r["watermark"].startswith("kgw") for r in marked)
    by_score = api(f"{viewer_url}/api/results?sort=score&order=desc&limit=36")["results"]
    assert [r["score"] for r in by_score] == sorted((r["score"] for r in by_score), reverse=True)
    detected = api(f"{viewer_url}/api/results?label=DETECTED&limit=500")
    assert detected["total"] == db_rows(view_db, "SELECT COUNT(*) FROM results WHERE label = 'DETECTED'")[0][0]
    assert api(f"{viewer_url}/api/results?score_min=0.5&score_max=1")["total"] == detected["total"]
    # text search: case ids and outputs; % and _ are literal
    assert api(f"{viewer_url}/api/results?q=book-003")["total"] == 4
    assert api(f"{viewer_url}/api/results?q=%25%25%25")["total"] == 0


@pytest.mark.parametrize("query, message", [
    ("sort=raw_output;DROP", "sort='raw_output;DROP': expected one of"),
    ("order=sideways", "order='sideways'"),
    ("limit=100000", "limit=100000: must be in [1, 500]"),
    ("offset=-1", "offset=-1"),
    ("score_min=nan", "score_min: 'nan' is not a finite number"),
    ("offset=x", "offset: 'x' is not an integer"),
    ("colour=red", "unknown parameter(s) colour"),
])
def test_bad_parameters_are_400_naming_them(viewer_url: str, query: str, message: str) -> None:
    status, headers, body = get(f"{viewer_url}/api/results?{query}")
    assert status == 400 and headers["Content-Type"] == "application/json"
    assert message in json.loads(body)["error"]


def test_one_result_has_everything_and_token_evidence_with_the_key(viewer_url: str, view_db: Path) -> None:
    (result_id, p_value, size), = db_rows(view_db, "SELECT result_id, json_extract(metadata_json, '$.p_value'),"
                                          " json_extract(metadata_json, '$.size') FROM results WHERE watermark !="
                                          " 'none' AND attack = 'none' ORDER BY case_id LIMIT 1")
    detail = api(f"{viewer_url}/api/results/{result_id}")
    assert detail["result_id"] == result_id and detail["prompt"]["user"] and detail["output"]
    assert detail["label"] in ("DETECTED", "NOT_DETECTED") and detail["metadata"]["p_value"] == p_value
    assert [j["method"] for j in detail["judgements"]] == ["perplexity"] and detail["judgements"][0]["parsed"]
    assert detail["run"]["status"] == "finished" and detail["latency_ms"] > 0
    tokens = detail["tokens"]
    (ids,), = db_rows(view_db, f"SELECT output_tokens_json FROM results WHERE result_id = {result_id}")
    assert [t["id"] for t in tokens] == json.loads(ids)
    assert sum(t["scored"] for t in tokens) == detail["metadata"]["num_tokens_scored"]
    assert "".join(t["text"] for t in tokens).strip() == detail["output"].strip()
    # the same detector that graded it: the last running p-value is the graded one, the size too
    assert tokens[-1]["p"] == pytest.approx(p_value, rel=1e-12)
    assert detail["evidence"]["output"]["size"] == size
    assert {t["score"] for t in tokens if t["scored"]} <= {0.0, 1.0}
    assert tokens[0]["scored"] is False and tokens[0]["score"] is None


def test_attacked_results_show_both_texts(viewer_url: str, view_db: Path) -> None:
    (result_id,), = db_rows(view_db, "SELECT result_id FROM results WHERE watermark != 'none' AND attack ="
                                     " 'lowercase' ORDER BY case_id LIMIT 1")
    detail = api(f"{viewer_url}/api/results/{result_id}")
    assert detail["attacked_output"] == detail["output"].lower()
    assert set(detail["evidence"]) == {"output", "attacked text"}
    assert detail["tokens"] == detail["evidence"]["attacked text"]["tokens"]
    assert {a["attack"] for a in detail["attacks"]} == {"none", "lowercase"}


def test_unwatermarked_results_show_evidence_under_a_chosen_watermark(viewer_url: str, view_db: Path,
                                                                      view_kgw: str) -> None:
    (result_id,), = db_rows(view_db, "SELECT result_id FROM results WHERE watermark = 'none' LIMIT 1")
    (spec,), = db_rows(view_db, "SELECT DISTINCT watermark FROM results WHERE watermark != 'none'")
    detail = api(f"{viewer_url}/api/results/{result_id}?" + urlencode({"watermark": spec}))
    assert detail["evidence"]["output"]["watermark"] == spec and detail["tokens"]
    status, _, body = get(f"{viewer_url}/api/results/{result_id}?watermark=exp")
    assert status == 400 and b"can be shown under" in body


def test_without_the_key_there_is_no_evidence_and_the_page_says_why(keyless_url: str, view_db: Path) -> None:
    (result_id,), = db_rows(view_db, "SELECT result_id FROM results WHERE watermark != 'none' LIMIT 1")
    detail = api(f"{keyless_url}/api/results/{result_id}")
    assert "tokens" not in detail and detail["evidence"] == {}
    status, _, page = get(f"{keyless_url}/results/{result_id}")
    assert status == 200 and b"Token evidence needs the watermark key" in page


def test_compare_two_watermarks(viewer_url: str, view_db: Path) -> None:
    (spec,), = db_rows(view_db, "SELECT DISTINCT watermark FROM results WHERE watermark != 'none'")
    found = api(f"{viewer_url}/api/compare?" + urlencode({"watermark_a": "none", "watermark_b": spec, "all": 1}))
    assert found["pairs"] == 18 and len(found["rows"]) == 18
    assert sum(t["count"] for t in found["transitions"]) == 18
    assert found["changed"] == sum(r["label_a"] != r["label_b"] for r in found["rows"])
    status, _, body = get(f"{viewer_url}/api/compare?run_a=x")
    assert status == 400 and b"run_a and run_b" in body


def test_safety_headers_methods_hosts_and_unknown_routes(viewer_url: str) -> None:
    status, headers, _ = get(f"{viewer_url}/")
    assert status == 200 and "script-src" not in headers["Content-Security-Policy"]
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert get(f"{viewer_url}/nowhere")[0] == 404 and get(f"{viewer_url}/api/results/999999")[0] == 404
    # a page elsewhere that rebinds its name to 127.0.0.1 is refused
    assert get(f"{viewer_url}/api/runs", {"Host": "attacker.example"})[0] == 421
    parts = urlsplit(viewer_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("POST", "/api/results", body=b"{}")
    assert conn.getresponse().status == 405
    conn.close()


def test_the_key_never_reaches_a_response_and_the_store_is_unchanged(viewer_url: str, view_db: Path,
                                                                      view_key: str) -> None:
    def fingerprint() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(view_db.parent.iterdir()) if p.name.startswith(view_db.name)}

    before = fingerprint()
    ids = [r[0] for r in db_rows(view_db, "SELECT result_id FROM results")]
    bodies = [get(f"{viewer_url}{path}")[2] for path in (
        "/", "/runs", "/charts", "/compare", "/api/runs", "/api/facets", "/api/results?limit=500",
        *(f"/results/{i}" for i in ids), *(f"/api/results/{i}" for i in ids))]
    assert all(view_key.encode() not in body for body in bodies)
    assert fingerprint() == before


def test_the_charts_page_shows_the_reports_benchmark_with_its_charts(viewer_url: str) -> None:
    status, _, page = get(f"{viewer_url}/charts")
    text = page.decode()
    assert status == 200 and "<svg class='tamper'" in text and "Watermark benchmark (MarkMyWords)" in text
    sources = re.findall(r"<img src='(/charts/[^']+\.png)'", text)
    assert sources, "the report's PNG charts"
    for source in sources:
        status, headers, image = get(f"{viewer_url}{source}")
        assert status == 200 and headers["Content-Type"] == "image/png" and image.startswith(b"\x89PNG")
    assert get(f"{viewer_url}/charts/nothing.png")[0] == 404
