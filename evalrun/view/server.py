"""The viewer's HTTP server: the standard library's threading server, read-only, local.

Why the standard library: the viewer serves a handful of GET routes to one user on one
machine; ``http.server.ThreadingHTTPServer`` does that with no dependency to install, audit or
keep current, and a thread per request keeps one slow page (token evidence, the charts) from
holding the others. Routes:

* HTML: ``/`` (results: filter, sort, page), ``/results/<id>``, ``/runs``, ``/compare``,
  ``/charts`` (and its PNG charts, ``/charts/<name>.png``); ``/static/view.css``;
* JSON: ``/api/runs``, ``/api/packs``, ``/api/results``, ``/api/results/<id>``,
  ``/api/compare``, ``/api/facets`` (see docs/view.md).

Safe by default: GET and HEAD only; a strict Content-Security-Policy (no script at all, styles
and images from the viewer only, forms posting to it only, no framing); requests whose
``Host`` is not the loopback address the viewer listens on are refused when it listens on
loopback (a web page elsewhere cannot reach it through DNS rebinding); every stored string is
escaped; the key never leaves the process.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

from evalrun._util.errors import EvalrunError
from evalrun._util.scrub import scrub
from evalrun._util.specs import is_none
from evalrun.view import pages
from evalrun.view.charts import ChartData
from evalrun.view.evidence import evidence
from evalrun.view.queries import QueryError, ResultQuery, StoreView

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cache-Control": "no-store", "Cross-Origin-Resource-Policy": "same-origin"}
_RESULT = re.compile(r"^/(api/)?results/(\d{1,18})$")


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _json_safe(value: Any) -> Any:
    """JSON has no NaN or infinity: they become null (a p-value of exactly 0 stays 0)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


class Viewer:
    """What the handlers share: the store (read-only), the key (memory only), the charts' cache."""

    def __init__(self, db: str | Path, *, key: str | None) -> None:
        self.store = StoreView(db)
        self.charts = ChartData(Path(db))
        self._key = key or None
        #: set when :meth:`warm` has filled the caches (or given up on one it could not fill)
        self.warmed = threading.Event()
        self._closing = threading.Event()

    def warm(self) -> threading.Thread:
        """Fill, on a daemon thread, what the first pages would otherwise compute while a person
        waits with no sign of work: the store's runs, facets and short names, one result's token
        evidence (loading the tokenizer and the detector: 2-4 s) and the charts (the report's
        computation over every result: seconds, a minute at 100,000 results). A request that
        needs one meanwhile waits for it (the charts) or computes it alongside (the rest). The
        thread reads only, and is a daemon: stopping the viewer never waits for it."""
        thread = threading.Thread(target=self._warm, name="evalrun-view-warm", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Stop warming after the current step, and close this thread's connection."""
        self._closing.set()
        self.store.close()

    def _warm(self) -> None:
        steps = [self.store.runs, self.store.facets, self.store.packs, self.store.names, self._warm_evidence,
                 lambda: self.charts.get(None)]
        try:
            for step in steps:
                if self._closing.is_set():
                    return
                try:
                    step()
                except EvalrunError:
                    pass  # the page that needs it says why, when it is opened
                except Exception as exc:  # a bug: one line, as for a request, and the other steps still run
                    print(f"evalrun view: warming the caches: {type(exc).__name__}: {self.scrub(str(exc))}",
                          file=sys.stderr)
        finally:
            self.store.close()  # this thread's connection
            self.warmed.set()

    def _warm_evidence(self) -> None:
        """One watermarked result's evidence, for the imports and loads every later one reuses."""
        if self._key is None:
            return
        found = self.store.store().conn.execute(
            "SELECT result_id FROM results WHERE watermark != 'none' ORDER BY result_id LIMIT 1").fetchone()
        if found is not None:
            self.result(int(found[0]), None)

    @property
    def has_key(self) -> bool:
        return self._key is not None

    def scrub(self, text: str) -> str:
        """``text`` with the key blanked: for messages that leave the process."""
        return scrub(text, self._key)

    # -- data, shared by the HTML pages and the API --------------------------------------
    def result(self, result_id: int, watermark: str | None) -> tuple[dict[str, Any], list[str], str | None]:
        """The detail of a result with its token evidence under ``watermark`` (its own, or
        for an unwatermarked result the chosen one of its pack and model), the watermark
        choices, and the one chosen."""
        detail = self.store.result(result_id)
        if detail is None:
            raise HttpError(404, f"no result {result_id} in this store")
        own = detail["watermark"]
        choices = [own] if not is_none(own) else list(self.store.store().watermarks_of(detail["pack"], detail["model"]))
        if watermark is not None and watermark not in choices:
            raise HttpError(400, f"watermark={watermark!r}: this result can be shown under {', '.join(choices) or 'none'}")
        chosen = watermark or (choices[0] if choices else None)
        detail["evidence"] = {}
        if self._key is not None and chosen is not None:
            row = self.store.row(result_id)
            assert row is not None
            transform = self.store.transform(row)
            threshold = detail["metadata"].get("threshold")
            texts = [("output", False)] + ([("attacked text", True)] if not is_none(detail["attack"]) else [])
            for name, attacked in texts:
                try:
                    detail["evidence"][name] = evidence(row, transform, detail["run"], key=self._key, watermark=chosen,
                                                        threshold=threshold, attacked=attacked)
                except (EvalrunError, ValueError) as exc:
                    detail["evidence"][name] = {"error": self.scrub(str(exc))}
            graded = detail["evidence"].get("attacked text" if len(texts) > 1 else "output", {})
            detail["tokens"] = graded.get("tokens", [])
        return detail, choices, chosen

    def compare(self, params: Mapping[str, str]) -> dict[str, Any]:
        allowed = {"run_a", "run_b", "watermark_a", "watermark_b", "pack", "model", "all"}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise QueryError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed))}")
        return self.store.compare(**{k: params.get(k) or None for k in allowed - {"all"}},
                                  changed_only=params.get("all") not in ("1", "true"))

    # -- routing -------------------------------------------------------------------------
    def handle(self, path: str, params: dict[str, str]) -> tuple[int, str, bytes]:
        """(status, content type, body) of one GET."""
        api = path.startswith("/api/")
        try:
            if api:
                return 200, "application/json", self._api(path, params)
            return 200, "text/html; charset=utf-8", self._page(path, params).encode("utf-8")
        except HttpError as exc:
            status, message = exc.status, str(exc)
        except QueryError as exc:
            status, message = 400, str(exc)
        except EvalrunError as exc:
            status, message = 500, str(exc)
        if api:
            return status, "application/json", json.dumps({"error": message}).encode("utf-8")
        return status, "text/html; charset=utf-8", pages.error_page(status, message).encode("utf-8")

    def _api(self, path: str, params: dict[str, str]) -> bytes:
        if path == "/api/runs":
            data: Any = self.store.runs()
        elif path == "/api/results":
            data = self.store.results(ResultQuery.from_params(params))
        elif path == "/api/facets":
            data = self.store.facets()
        elif path == "/api/packs":
            data = self.store.packs()
        elif path == "/api/compare":
            data = self.compare(params)
        elif (m := _RESULT.match(path)) is not None:
            data = self.result(int(m.group(2)), params.get("watermark"))[0]
        else:
            raise HttpError(404, f"no API route {path}")
        return json.dumps(_json_safe(data), sort_keys=True).encode("utf-8")

    def _page(self, path: str, params: dict[str, str]) -> str:
        if path == "/":
            query = ResultQuery.from_params(params)
            return pages.browse_page(query, self.store.results(query), self.store.facets(), self.store.runs(),
                                     str(self.store.db), self.store.names())
        if path == "/runs":
            return pages.runs_page(self.store.runs(), self.store.packs())
        if path == "/compare":
            found, error = None, None
            if params:
                try:
                    found = self.compare(params)
                except QueryError as exc:
                    error = str(exc)
            return pages.compare_page(params, self.store.runs(), self.store.facets()["watermark"], found, error,
                                      self.store.names())
        if path == "/charts":
            return pages.charts_page(self.charts.get(params.get("run") or None), self.store.names())
        if (m := _RESULT.match(path)) is not None and m.group(1) is None:
            detail, choices, chosen = self.result(int(m.group(2)), params.get("watermark"))
            return pages.result_page(detail, detail["evidence"], watermark_choices=choices, chosen=chosen,
                                     key_given=self.has_key)
        raise HttpError(404, f"no page {path}")


def make_handler(viewer: Viewer, allowed_hosts: frozenset[str] | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "evalrun-view"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass  # requests are not logged: a query string may hold stored text

        def _send(self, status: int, content_type: str, body: bytes, *, head: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _get(self, head: bool) -> None:
            host = (self.headers.get("Host") or "").lower()
            if allowed_hosts is not None and host not in allowed_hosts:
                self._send(421, "text/plain; charset=utf-8", b"evalrun view: unknown Host header\n", head=head)
                return
            parts = urlsplit(self.path)
            if parts.path == "/static/view.css":
                self._send(200, "text/css; charset=utf-8", pages.CSS_BYTES, head=head)
                return
            if parts.path.startswith("/charts/") and parts.path.endswith(".png"):
                image = viewer.charts.image(parts.path.removeprefix("/charts/"))
                if image is None:
                    self._send(404, "text/plain; charset=utf-8", b"no such chart: open /charts first\n", head=head)
                else:
                    self._send(200, "image/png", image, head=head)
                return
            params = dict(parse_qsl(parts.query, keep_blank_values=False))
            try:
                status, content_type, body = viewer.handle(parts.path, params)
            except Exception as exc:  # a bug must not kill the server, nor show a traceback page
                print(f"evalrun view: {parts.path}: {type(exc).__name__}: {viewer.scrub(str(exc))}", file=sys.stderr)
                status, content_type = 500, "text/html; charset=utf-8"
                body = pages.error_page(500, f"internal error ({type(exc).__name__})").encode("utf-8")
            self._send(status, content_type, body, head=head)

        def do_GET(self) -> None:  # noqa: N802 - the base class's protocol
            self._get(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._get(head=True)

        def _refuse(self) -> None:
            self._send(int(HTTPStatus.METHOD_NOT_ALLOWED), "text/plain; charset=utf-8",
                       b"evalrun view is read-only: GET and HEAD only\n")

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    return Handler


class _Server(ThreadingHTTPServer):
    """One thread per connection, with room for a burst of clients and quiet about the ones
    that leave early."""

    #: connections the kernel queues while threads start (socketserver's default, 5, left
    #: clients of a 200-connection burst waiting for their timeouts)
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a closed tab, a reset) is no error of the
        viewer's: nothing is printed. Anything else is one line, never a traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return
        print(f"evalrun view: a request failed: {type(exc).__name__}: {exc}", file=sys.stderr)


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


def make_server(viewer: Viewer, host: str, port: int, *, warm: bool = True) -> ThreadingHTTPServer:
    """The server, bound (``port`` 0: a free one); raises OSError when the port is taken. With
    ``warm``, the viewer's caches start filling in the background once the port is bound
    (:meth:`Viewer.warm`), so the first result and the first charts page answer at once."""
    loopback = is_loopback(host)
    server_class = _IPv6Server if ":" in host else _Server
    server = server_class((host, port), make_handler(viewer, None))
    server.daemon_threads = True
    bound = server.server_address[1]
    if loopback:
        names = {host, "localhost", "127.0.0.1", "[::1]"}
        allowed = frozenset(f"{n}:{bound}" for n in names) | (frozenset(names) if bound == 80 else frozenset())
        server.RequestHandlerClass = make_handler(viewer, allowed)
    if warm:
        viewer.warm()
    return server
