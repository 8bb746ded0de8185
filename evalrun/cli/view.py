"""``evalrun view``: serve a local, read-only web viewer of a results database."""

from __future__ import annotations

import argparse
import errno
import os
import sys
import time

from evalrun._util.errors import EvalrunError
from evalrun.view.server import Viewer, is_loopback, make_server
from evalrun.watermark.key_strength import warn_if_weak
from evalrun.watermark.registry import KEY_ENV

DEFAULT_PORT = 8765


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="the results database (opened read-only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only; another address lets "
                             "others on the network read the store)")
    parser.add_argument("--key", default=None,
                        help=f"watermark key for token evidence (default: ${KEY_ENV}); kept in memory only")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    started = time.perf_counter()
    if not 0 <= args.port <= 65535:
        raise EvalrunError(f"--port {args.port}: must be in [0, 65535]")
    key = args.key if args.key is not None else os.environ.get(KEY_ENV)
    warn_if_weak(key, from_option=args.key is not None)
    viewer = Viewer(args.db, key=key)
    try:
        server = make_server(viewer, args.host, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise EvalrunError(f"--port {args.port}: already in use on {args.host}; choose another with --port "
                               "(0 picks a free one)") from None
        raise EvalrunError(f"--host {args.host} --port {args.port}: cannot listen ({exc.strerror or exc})") from None
    if not is_loopback(args.host):
        print(f"evalrun view: warning: listening on {args.host}, not loopback: anyone who can reach this machine can "
              "read the store (and, with a key, its token evidence)", file=sys.stderr)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    evidence = "with token evidence" if viewer.has_key else f"no key: token evidence needs --key or ${KEY_ENV}"
    print(f"evalrun view: {args.db} at http://{shown}:{port}/ ({evidence}); ready in "
          f"{time.perf_counter() - started:.1f} s; Ctrl-C stops it", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("evalrun view: stopped", file=sys.stderr)
    finally:
        server.server_close()
        viewer.store.close()
    return 0
