"""Headless Chromium driven over the DevTools protocol, with the standard library only.

For the viewer's tests and its screenshot: load a page, read or change its DOM, click, submit
a form, wait for the next page, take a screenshot::

    with Browser.start() as browser:
        browser.open("http://127.0.0.1:8765/")
        browser.click("a.result-link")        # waits for the page it leads to
        browser.evaluate("document.title")

Chromium is Debian's (``apt-get install chromium``) or any on the PATH; the DevTools socket
is a WebSocket, spoken here in a few dozen lines (client frames masked, server frames read
whole, continuation frames joined). Expressions run through ``Runtime.evaluate``, which a
page's Content-Security-Policy does not govern: the page itself may forbid every script.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    pass


class _WebSocket:
    """A minimal RFC 6455 client: text frames out (masked), whole messages in."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BrowserError("DevTools closed the connection during the WebSocket handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise BrowserError(f"DevTools refused the WebSocket: {status.decode(errors='replace')}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise BrowserError("DevTools closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                  bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                  bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else b""
            data = self._read(length)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = first & 0x0F
            if opcode == 8:
                raise BrowserError("DevTools closed the WebSocket")
            if opcode == 9:  # ping: answer, keep reading
                continue
            message += data
            if first & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """One headless Chromium with one page (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen[bytes], profile: str, ws: _WebSocket, timeout: float) -> None:
        self.proc, self.profile, self.ws, self.timeout = proc, profile, ws, timeout
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    @classmethod
    def start(cls, binary: str | None = None, *, timeout: float = 60.0, width: int = 1280, height: int = 1000) -> Browser:
        binary = binary or find_chromium()
        if binary is None:
            raise BrowserError("no Chromium found (apt-get install chromium)")
        profile = tempfile.mkdtemp(prefix="evalrun-browser-")
        args = [binary, "--headless", "--disable-gpu", "--no-first-run", "--disable-extensions",
                "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={width},{height}",
                "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start as root with the sandbox
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                shutil.rmtree(profile, ignore_errors=True)
                raise BrowserError(f"Chromium did not open its DevTools port (exit {proc.poll()})")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as response:
            targets = json.load(response)
        page = next(t for t in targets if t.get("type") == "page")
        return cls(proc, profile, _WebSocket(page["webSocketDebuggerUrl"], timeout), timeout)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait(timeout=30)
            shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and wait for its answer (events that arrive meanwhile are
        kept in :attr:`events`)."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self._id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def _wait_event(self, name: str) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == name:
                    del self.events[: i + 1]
                    return
            if time.monotonic() > deadline:
                raise BrowserError(f"no {name} within {self.timeout} s")
            self.events.append(json.loads(self.ws.receive()))

    def open(self, url: str) -> None:
        """Load ``url`` and wait until it has loaded."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        found = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in found:
            raise BrowserError(f"{expression[:80]}: {found['exceptionDetails'].get('text')} "
                               f"{found['exceptionDetails'].get('exception', {}).get('description', '')}")
        return found.get("result", {}).get("value")

    def click(self, selector: str) -> None:
        """Click the first element matching ``selector`` and wait for the page it loads."""
        self.events.clear()
        if not self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                             " if (!e) return false; e.click(); return true; })()"):
            raise BrowserError(f"nothing matches {selector!r} on {self.url}")
        self._wait_event("Page.loadEventFired")

    def choose(self, selector: str, value: str) -> None:
        """Set the value of a form field (a select's option or an input's text)."""
        if not self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                             f" if (!e) return false; e.value = {json.dumps(value)}; return e.value === {json.dumps(value)}; }})()"):
            raise BrowserError(f"cannot set {selector!r} to {value!r} on {self.url}")

    @property
    def url(self) -> str:
        return str(self.evaluate("location.href"))

    def html(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
