#!/usr/bin/env python3
"""Take the screenshots of docs/view.md: a viewer on a store, one result's token evidence and
the results listing, in headless Chromium.

    python scripts/screenshot_view.py --db results.sqlite --key public-example-key [--out docs/images]
"""

from __future__ import annotations

import argparse
import base64
import sqlite3
import sys
import threading
from pathlib import Path

from evalrun.testing.browser import Browser
from evalrun.view.server import Viewer, make_server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args()
    with sqlite3.connect(f"file:{args.db}?mode=ro", uri=True) as conn:
        found = conn.execute("SELECT result_id FROM results WHERE watermark LIKE 'kgw%' AND attack = 'contraction'"
                             " ORDER BY case_id LIMIT 1").fetchone()
    if found is None:
        print(f"{args.db}: no kgw result under the contraction attack (run the README's main command)", file=sys.stderr)
        return 2
    server = make_server(Viewer(args.db, key=args.key), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with Browser.start(width=1280, height=900) as browser:
            browser.open(f"{url}/?watermark=none&attack=none&sort=score&order=desc")
            browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
            browser.screenshot(args.out / "view-results.png")
            browser.open(f"{url}/results/{found[0]}")
            browser.evaluate("document.getElementById('evidence').scrollIntoView()")
            data = browser.call("Page.captureScreenshot", format="png")["data"]
            (args.out / "view-evidence.png").write_bytes(base64.b64decode(data))
    finally:
        server.shutdown()
    print(f"screenshots in {args.out}: view-results.png, view-evidence.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
