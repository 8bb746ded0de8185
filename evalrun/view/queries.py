"""What the viewer reads from a store: runs, results paged, filtered and sorted in SQL, one
result with everything stored about it, and two runs or watermarks side by side.

Every query runs on a read-only connection (SQLite ``mode=ro``, one per server thread), so a
viewing session never changes a byte of the store, and a store of 100,000 results is never
loaded whole: filters, sorting and paging are SQL clauses with bound parameters, and sort
columns come from a fixed table, never from the request's text.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalrun._util.checks import finite_number
from evalrun._util.errors import EvalrunError
from evalrun.metrics.judgements import read_judgements
from evalrun.report.export import open_store
from evalrun.store.database import Store
from evalrun.watermark.naming import short_name, short_names
from evalrun.watermark.registry import parse_watermark

#: the columns of a results listing, in the order the page shows them
LISTED = ("result_id", "pack", "case_id", "model", "watermark", "attack", "repetition", "label", "score",
          "latency_ms", "run_id")
#: what ``sort=`` may name (a fixed set: the request's text never reaches SQL as a name)
SORTABLE = frozenset(LISTED)
#: the filters that match one column exactly
EXACT = ("pack", "model", "watermark", "attack", "label")
#: the exact filters whose values are specs: they also take a short name or a scheme name
SPECS = ("watermark", "attack")
#: ``label=`` value that selects results without a label (failed generations)
NO_LABEL = "(none)"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: the longest text search (``q``) taken: longer is a client's mistake, not a search
MAX_QUERY = 1_000
#: result pairs a comparison lists at most (its summary counts all of them)
MAX_COMPARED = 2000


class QueryError(EvalrunError):
    """A request parameter that cannot be used, named: the server answers 400 with it."""


def _int(params: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    text = params.get(name)
    if not text:
        return default
    value = int(finite_number(text, name, integer=True, error=QueryError))
    if not lo <= value <= hi:
        raise QueryError(f"{name}={value}: must be in [{lo}, {hi}]")
    return value


def _float(params: Mapping[str, str], name: str) -> float | None:
    text = params.get(name)
    return finite_number(text, name, error=QueryError) if text else None


def scheme_of(spec: str) -> str:
    """The scheme (or attack) name of a spec: the part before ``:``."""
    return spec.split(":", 1)[0].strip()


def matching(value: str, stored: Sequence[str], names: Mapping[str, str] | None = None) -> list[str]:
    """The stored specs that ``value`` names: the spec itself, its short name (``kgw γ=0.5``,
    also as ``names`` shows it) or its scheme (``kgw``: every kgw spec). A person types what the
    pages show, not the canonical spec the store keeps; a spec written out of canonical order or
    with defaults shortens as the stored one does and matches it too."""
    found = {s for tier in match_tiers(value, stored, names) for s in tier}
    return [s for s in stored if s in found]


def match_tiers(value: str, stored: Sequence[str], names: Mapping[str, str] | None = None) -> list[list[str]]:
    """The specs ``value`` names as their full text, as their short name, and as their scheme,
    in that order: where one spec must be chosen (a side of a comparison), the first that
    names any decides, so ``kgw`` is the spec that shortens to ``kgw`` before it is every kgw."""
    full = _canonical(value)
    asked = {value, full, short_name(full)}
    return [[s for s in stored if s in (value, full)],
            [s for s in stored if asked & {short_name(s), (names or {}).get(s, s)}],
            [s for s in stored if scheme_of(s) == value]]


@lru_cache(maxsize=256)
def _canonical(value: str) -> str:
    """``value`` as the store writes a watermark spec (every default filled in, in order), or
    as given when it is no watermark spec (an attack, a scheme's typo)."""
    try:
        scheme = parse_watermark(value)
    except (EvalrunError, ValueError, TypeError):  # any text typed into a filter: never a 500
        return value
    return value if scheme is None else str(scheme.spec)


@dataclass(frozen=True)
class ResultQuery:
    """One page of results: exact filters, a score range, a text search, an order."""

    pack: str | None = None
    model: str | None = None
    watermark: str | None = None
    attack: str | None = None
    label: str | None = None
    run: str | None = None
    q: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    sort: str = "result_id"
    order: str = "asc"
    offset: int = 0
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> ResultQuery:
        """From a query string's values; unknown names and bad values are a :class:`QueryError`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise QueryError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        sort = params.get("sort") or "result_id"
        if sort not in SORTABLE:
            raise QueryError(f"sort={sort!r}: expected one of {', '.join(sorted(SORTABLE))}")
        order = params.get("order") or "asc"
        if order not in ("asc", "desc"):
            raise QueryError(f"order={order!r}: expected asc or desc")
        q = params.get("q") or None
        if q is not None and len(q) > MAX_QUERY:
            raise QueryError(f"q: {len(q):,} characters; a search takes at most {MAX_QUERY:,}")
        return cls(**{name: params.get(name) or None for name in (*EXACT, "run")}, q=q,
                   score_min=_float(params, "score_min"), score_max=_float(params, "score_max"),
                   sort=sort, order=order, offset=_int(params, "offset", 0, 0, 10**12),
                   limit=_int(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT))

    def params(self, **changes: Any) -> dict[str, str]:
        """The query string of this query with ``changes`` (empty values left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        defaults = ResultQuery()
        return {k: str(v) for k, v in values.items() if v not in (None, "") and v != getattr(defaults, k)}

    def where(self, matched: Mapping[str, Sequence[str]] | None = None) -> tuple[str, list[Any]]:
        """The SQL ``WHERE`` clause and its arguments; a filter in ``matched`` (the stored
        values its text names, :func:`matching`) selects any of those values."""
        clauses: list[str] = []
        args: list[Any] = []
        for name in EXACT:
            value = getattr(self, name)
            if value is None:
                continue
            values = list((matched or {}).get(name) or ())
            if name == "label" and value == NO_LABEL:
                clauses.append("label IS NULL")
            elif values:
                clauses.append(f"{name} IN ({', '.join('?' * len(values))})")
                args += values
            else:
                clauses.append(f"{name} = ?")
                args.append(value)
        if self.run is not None:
            clauses.append("result_id IN (SELECT result_id FROM run_items WHERE run_id = ?)")
            args.append(self.run)
        if self.score_min is not None:
            clauses.append("score >= ?")
            args.append(self.score_min)
        if self.score_max is not None:
            clauses.append("score <= ?")
            args.append(self.score_max)
        if self.q:
            # a substring test, case-insensitive for ASCII as LIKE is, but with no pattern to
            # parse (LIKE refuses long ones) and NUL a character like any other (LIKE stops at it)
            clauses.append("(" + " OR ".join(f"instr(lower({c}), lower(?)) > 0" for c in (
                "case_id", "raw_output", "attacked_output", "reason", "error")) + ")")
            args += [self.q] * 5
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def store_state(db: Path) -> tuple[int, ...]:
    """What changes when a writer changes the store (the file's and its log's modification
    times and sizes): answers computed from a whole store are cached under it."""
    parts: list[int] = []
    for path in (db, db.with_name(db.name + "-wal")):
        stat = path.stat() if path.exists() else None
        parts += [stat.st_mtime_ns, stat.st_size] if stat else [0, 0]
    return tuple(parts)


class _Row(dict):
    """A stored row; a column an older schema version lacks (``metadata_json`` before
    version 3, ...) reads as None, as for a row that never had a value there."""

    def __missing__(self, key: str) -> None:
        return None


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


class StoreView:
    """Read-only access to one store for the viewer's threads (a connection per thread)."""

    def __init__(self, db: str | Path) -> None:
        self.db = Path(db)
        self._local = threading.local()
        #: answers that read the whole store (runs, facets), under the store's state
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._cache_lock = threading.Lock()
        open_store(self.db).close()  # one-line errors for a missing, damaged or foreign store, now
        store = self.store()
        try:
            store.conn.execute("SELECT result_id FROM results LIMIT 1").fetchall()
        except Exception as exc:  # sqlite3.DatabaseError on damaged pages
            raise EvalrunError(f"--db {self.db}: cannot be read as an evalrun store ({exc})") from None

    def store(self) -> Store:
        """This thread's connection (the server runs each request on a thread of its own). The
        store's integrity was checked once, when the viewer opened it: not again per request."""
        store = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = open_store(self.db, check=False)
        return store

    def close(self) -> None:
        store = getattr(self._local, "store", None)
        if store is not None:
            store.close()
            self._local.store = None

    def _cached(self, name: str, compute: Any) -> Any:
        key = (name, *store_state(self.db))
        with self._cache_lock:
            if key in self._cache:
                return self._cache[key]
        value = compute()
        with self._cache_lock:
            self._cache = {k: v for k, v in self._cache.items() if k[1:] == key[1:]}
            self._cache[key] = value
        return value

    # -- runs -----------------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        return list(self._cached("runs", self._runs))

    def _runs(self) -> list[dict[str, Any]]:
        conn = self.store().conn
        counts = dict(conn.execute("SELECT run_id, COUNT(*) FROM run_items GROUP BY run_id").fetchall())
        out = []
        for r in conn.execute("SELECT * FROM runs ORDER BY started_at"):
            row = _Row(r)
            out.append({
                "run_id": row["run_id"], "status": row["status"] or ("finished" if row["finished_at"] else "interrupted"),
                "started_at": row["started_at"], "finished_at": row["finished_at"], "git_sha": row["git_sha"],
                "git_dirty": bool(row["git_dirty"]), "evalrun_version": row["evalrun_version"],
                "python": row["python"], "platform": row["platform"], "argv": _loads(row["argv"]),
                "seed": row["seed"], "config": _loads(row["config_json"]), "host": row["host"],
                "results": counts.get(row["run_id"], 0)})
        return out

    def run(self, run_id: str) -> dict[str, Any] | None:
        return next((r for r in self.runs() if r["run_id"] == run_id), None)

    # -- listing --------------------------------------------------------------------------
    def packs(self) -> list[dict[str, Any]]:
        """Each pack's results, errors and labels."""
        return list(self._cached("packs", self._packs))

    def _packs(self) -> list[dict[str, Any]]:
        conn = self.store().conn
        out: dict[str, dict[str, Any]] = {}
        for pack, label, errors, n in conn.execute(
                "SELECT pack, label, SUM(error IS NOT NULL), COUNT(*) FROM results GROUP BY pack, label ORDER BY pack"):
            entry = out.setdefault(pack, {"pack": pack, "results": 0, "errors": 0, "labels": {}})
            entry["results"] += n
            entry["errors"] += errors
            if label is not None:
                entry["labels"][label] = n
        return list(out.values())

    def facets(self) -> dict[str, list[str]]:
        """The values each exact filter can take (for the filter menus)."""
        return dict(self._cached("facets", self._facets))

    def _facets(self) -> dict[str, list[str]]:
        conn = self.store().conn
        out = {}
        for name in EXACT:
            values = [r[0] for r in conn.execute(f"SELECT DISTINCT {name} FROM results ORDER BY {name}")]
            out[name] = [NO_LABEL if v is None else str(v) for v in values]
        return out

    def names(self) -> dict[str, str]:
        """Each stored watermark's short name (:func:`~evalrun.watermark.naming.short_names`:
        specs that shorten alike keep their full text), for what a person reads."""
        return dict(self._cached("names", lambda: short_names(self.facets()["watermark"])))

    def matched(self, query: ResultQuery) -> dict[str, list[str]]:
        """The stored specs each spec filter of ``query`` names (:func:`matching`); a filter
        that names none (an empty list) matches its text exactly: nothing."""
        facets, names = self.facets(), self.names()
        return {name: matching(getattr(query, name), facets[name], names) for name in SPECS
                if getattr(query, name) is not None}

    def results(self, query: ResultQuery) -> dict[str, Any]:
        """A page of results, with the stored specs each spec filter matched (``matched``)."""
        matched = self.matched(query)
        where, args = query.where(matched)
        conn = self.store().conn
        total = conn.execute(f"SELECT COUNT(*) FROM results{where}", args).fetchone()[0]
        order = f"{query.sort} {query.order.upper()}" + ("" if query.sort == "result_id" else ", result_id ASC")
        rows = conn.execute(f"SELECT {', '.join(LISTED)}, error FROM results{where} ORDER BY {order} LIMIT ? OFFSET ?",
                            [*args, query.limit, query.offset]).fetchall()
        return {"results": [{**{k: r[k] for k in LISTED}, "error": r["error"]} for r in rows], "total": total,
                "offset": query.offset, "limit": query.limit, "sort": query.sort, "order": query.order,
                "matched": matched}

    # -- one result -----------------------------------------------------------------------
    def row(self, result_id: int) -> dict[str, Any] | None:
        found = self.store().conn.execute("SELECT * FROM results WHERE result_id = ?", (result_id,)).fetchone()
        return None if found is None else _Row(found)

    def transform(self, row: Mapping[str, Any]) -> dict[str, Any] | None:
        key = row.get("transform_key")
        if not key:
            return None
        found = self.store().transforms([key]).get(key)
        return None if found is None else _Row(found)

    def result(self, result_id: int) -> dict[str, Any] | None:
        """Everything stored about one result (its tokens' evidence is :mod:`evalrun.view.evidence`'s)."""
        row = self.row(result_id)
        if row is None:
            return None
        store = self.store()
        transform = self.transform(row)
        siblings = store.conn.execute(
            "SELECT result_id, attack, label, score, attacked_output FROM results WHERE gen_key = ? ORDER BY attack",
            (row["gen_key"],)).fetchall()
        judgements = read_judgements(store.judgements_for(row["item_key"])) if store.has_judgements() else ()
        return {
            "result_id": row["result_id"], "pack": row["pack"], "case_id": row["case_id"], "model": row["model"],
            "watermark": row["watermark"], "attack": row["attack"], "repetition": row["repetition"],
            "case": _loads(row["case_json"]), "prompt": _loads(row["prompt_json"]), "params": _loads(row["params_json"]),
            "output": row["raw_output"], "attacked_output": transform["text"] if transform else row["attacked_output"],
            "attack_error": transform["error"] if transform else None,
            "label": row["label"], "score": row["score"], "reason": row["reason"], "error": row["error"],
            "metadata": _loads(row["metadata_json"]) or {}, "grader_hash": row["grader_hash"],
            "graded_at": row["graded_at"], "latency_ms": row["latency_ms"], "tokens_in": row["tokens_in"],
            "tokens_out": row["tokens_out"], "served_model": row["served_model"], "retries": row["retries"],
            "extra": _loads(row["extra_json"]) or {}, "created_at": row["created_at"],
            "judgements": [{"judge": j.judge, "method": j.method, "raw": j.raw, "parsed": dict(j.parsed),
                            "position": j.position, "error": j.error} for j in judgements],
            "attacks": [{"result_id": s["result_id"], "attack": s["attack"], "label": s["label"], "score": s["score"]}
                        for s in siblings],
            "run": self.run(row["run_id"]),
        }

    # -- comparison -----------------------------------------------------------------------
    def compare(self, *, run_a: str | None = None, run_b: str | None = None, watermark_a: str | None = None,
                watermark_b: str | None = None, pack: str | None = None, model: str | None = None,
                changed_only: bool = True) -> dict[str, Any]:
        """Two runs (``run_a``/``run_b``) or two watermarks (``watermark_a``/``watermark_b``) on
        the same cases: the pairs' labels and scores, and how labels moved."""
        by_run = run_a is not None or run_b is not None
        if by_run and not (run_a and run_b):
            raise QueryError("compare two runs with run_a and run_b")
        if not by_run and not (watermark_a and watermark_b):
            raise QueryError("compare two runs (run_a, run_b) or two watermarks (watermark_a, watermark_b)")
        matched: dict[str, list[str]] = {}
        if not by_run:
            assert watermark_a and watermark_b  # checked above
            watermark_a = self._one_watermark("watermark_a", watermark_a)
            watermark_b = self._one_watermark("watermark_b", watermark_b)
            matched = {"watermark_a": [watermark_a], "watermark_b": [watermark_b]}
        match = ["pack", "case_id", "model", "attack", "repetition"] + (["watermark"] if by_run else [])
        side = ("result_id IN (SELECT result_id FROM run_items WHERE run_id = ?)" if by_run else "watermark = ?")
        extra, args = "", []
        for name, value in (("pack", pack), ("model", model)):
            if value:
                extra += f" AND {name} = ?"
                args.append(value)
        # each side read once and joined here (a hash join): an SQL self-join on these columns
        # has no index to use and grows with the square of a pack's results
        sql = (f"SELECT result_id, {', '.join(match)}, label, score FROM results WHERE {side}{extra}"
               " ORDER BY pack, case_id, attack, repetition, result_id")
        first, second = (run_a, run_b) if by_run else (watermark_a, watermark_b)
        conn = self.store().conn
        b_side = {tuple(r[c] for c in match): r for r in conn.execute(sql, [second, *args])}
        pairs = []
        for a in conn.execute(sql, [first, *args]):
            b = b_side.get(tuple(a[c] for c in match))
            if b is not None:
                pairs.append({"a_id": a["result_id"], "b_id": b["result_id"], **{c: a[c] for c in match},
                              "label_a": a["label"], "label_b": b["label"], "score_a": a["score"], "score_b": b["score"]})
        transitions: dict[tuple[str, str], int] = {}
        listed: list[dict[str, Any]] = []
        for pair in pairs:
            pair["changed"] = pair["label_a"] != pair["label_b"]
            key = (str(pair["label_a"]), str(pair["label_b"]))
            transitions[key] = transitions.get(key, 0) + 1
            if (pair["changed"] or not changed_only) and len(listed) < MAX_COMPARED:
                listed.append(pair)
        return {"by": "run" if by_run else "watermark", "a": first, "b": second, "pairs": len(pairs),
                "changed": sum(n for (a, b), n in transitions.items() if a != b),
                "transitions": [{"label_a": a, "label_b": b, "count": n} for (a, b), n in sorted(transitions.items())],
                "rows": listed, "listed_at_most": MAX_COMPARED, "matched": matched}

    def _one_watermark(self, name: str, value: str) -> str:
        """The one stored watermark ``value`` names (a spec, short name or scheme): pairs are
        matched on everything but the watermark, so a side must be one spec; none or several
        are a :class:`QueryError` listing what to choose from."""
        stored, names = self.facets()["watermark"], self.names()
        found = next((tier for tier in match_tiers(value, stored, names) if tier), [])
        if len(found) == 1:
            return found[0]
        listed = "; ".join(_named(s, names) for s in (found or stored)) or "none stored"
        if found:
            raise QueryError(f"{name}={value} matches {len(found)} watermarks, and each side is one: choose one of "
                             f"{listed}")
        raise QueryError(f"{name}={value} matches no stored watermark; stored: {listed}")


def _named(spec: str, names: Mapping[str, str]) -> str:
    """``short (full spec)``, or the spec alone when it has no shorter name."""
    short = names.get(spec, spec)
    return spec if short == spec else f"{short} ({spec})"
