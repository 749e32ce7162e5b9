#!/usr/bin/env python3
"""Screenshot of a Chrome trace in Chrome DevTools' Performance panel, rendered by headless Chromium.

usage: scripts/devtools_screenshot.py TRACE.json -o OUT.png [--size 1600x900] [--window START_MS END_MS]
                                      [--search TERM]... [--chromium PATH]

Starts Debian's `chromium` headless with a remote-debugging port (scripts/setup.sh --chromium installs it),
serves the trace on 127.0.0.1 and opens the DevTools frontend that Chromium itself serves on that port with
?loadTimelineFromURL=, the Performance panel's own way to load a trace. It talks the DevTools protocol over
the port's WebSocket (a minimal client, standard library only), waits until the panel has drawn the trace,
optionally zooms to a time window (ms from the start of the trace) and saves the page as PNG. --search TERM
types TERM into the panel's search box (Ctrl+F) and prints how many entries DevTools found, e.g.
"drop_gil: 675 matches": what DevTools itself shows of a trace, to set against the file's counts.
"""
import argparse
import base64
import functools
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client-masked, no extensions."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise RuntimeError("the DevTools port closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"WebSocket handshake refused: {head.decode(errors='replace').splitlines()[0]}")

    def _exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise RuntimeError("the DevTools connection closed")
            data += chunk
        return data

    def send(self, text):
        payload = text.encode()
        n = len(payload)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            data = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise RuntimeError("the DevTools connection closed")
            if opcode in (0x9, 0xA):  # ping / pong: not used by Chromium here
                continue
            message += data
            if b0 & 0x80:
                return message.decode()


class Cdp:
    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")


# Deep query through the frontend's shadow roots (the panel is made of web components).
DEEP_QUERY = """
function deepQueryAll(selector, root = document) {
  const out = [...root.querySelectorAll(selector)];
  for (const el of root.querySelectorAll('*')) if (el.shadowRoot) out.push(...deepQueryAll(selector, el.shadowRoot));
  return out;
}
"""


def serve_file(path):
    """Serves `path`'s directory on 127.0.0.1 with CORS (the frontend's origin is the debugging port's)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def end_headers(self):
            self.send_header("Access-Control-Allow-Origin", "*")
            super().end_headers()

        def log_message(self, *args):
            pass

    handler = functools.partial(Handler, directory=os.path.dirname(os.path.abspath(path)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/{urllib.parse.quote(os.path.basename(path))}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--size", default="1600x900")
    parser.add_argument("--window", nargs=2, type=float, metavar=("START_MS", "END_MS"))
    parser.add_argument("--search", action="append", default=[], metavar="TERM")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    width, height = (int(x) for x in args.size.split("x"))
    if not os.access(args.chromium, os.X_OK):
        sys.exit(f"devtools_screenshot: error: no chromium at {args.chromium} (scripts/setup.sh --chromium)")

    server, trace_url = serve_file(args.trace)
    profile = tempfile.mkdtemp(prefix="gilspy-chromium-")
    chrome = subprocess.Popen([args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--remote-debugging-port=0", f"--user-data-dir={profile}",
                               f"--window-size={width},{height}", "about:blank"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + args.timeout
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.monotonic() > deadline or chrome.poll() is not None:
                sys.exit("devtools_screenshot: error: chromium did not open its debugging port")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        base = f"http://127.0.0.1:{port}"
        pages = json.load(urllib.request.urlopen(f"{base}/json/list"))
        page = next(p for p in pages if p["type"] == "page")
        cdp = Cdp(page["webSocketDebuggerUrl"])
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        cdp.call("Page.navigate", url=f"{base}/devtools/devtools_app.html?panel=timeline")
        # The Performance panel's own "Load profile" file input (?loadTimelineFromURL= loads nothing in a
        # frontend served by the debugging port).
        file_input = wait_for(cdp, "deepQueryAll('input[type=file]')[0]", deadline, "the Performance panel")
        cdp.call("DOM.setFileInputFiles", files=[os.path.abspath(args.trace)], objectId=file_input)
        wait_for(cdp, "deepQueryAll('.timeline-flamechart canvas, .flame-chart-main-pane canvas')"
                      ".find(c => c.offsetWidth > 0 && !deepQueryAll('.timeline-status-dialog').length)",
                 deadline, "the trace in the flame chart")
        time.sleep(2)
        tidy_panel(cdp, first_process_tracks(args.trace))
        for term in args.search:
            print(f"{term}: {search(cdp, term, width, height)}")
        if args.window:
            show_window(cdp, args.trace, *args.window)
        time.sleep(2)
        shot = cdp.call("Page.captureScreenshot", format="png")
        with open(args.output, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"wrote {args.output}")
    finally:
        chrome.terminate()
        try:
            chrome.wait(10)
        except subprocess.TimeoutExpired:
            chrome.kill()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(cdp, expression, deadline, what):
    """Polls a deep-query expression until it yields an element; returns its remote object id."""
    while True:
        r = cdp.call("Runtime.evaluate", expression=DEEP_QUERY + expression)["result"]
        if r.get("subtype") == "node":
            return r["objectId"]
        if time.monotonic() > deadline:
            sys.exit(f"devtools_screenshot: error: timed out waiting for {what}")
        time.sleep(0.3)


def click(cdp, x, y):
    for kind in ("mousePressed", "mouseReleased"):
        cdp.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


# Where the flame chart draws the headers (px from its canvas's top, DevTools' default font size; measured on
# Chromium 156): the first process, then one collapsed track per row.
PROCESS_ROW_Y = 27
FIRST_TRACK_ROW_Y = 42
ROW_PX = 21


def tidy_panel(cdp, tracks):
    """Closes the first-run shortcuts dialog and the sidebar, and expands the first process's threads."""
    cdp.call("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    cdp.call("Input.dispatchKeyEvent", type="keyUp", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    cdp.evaluate(DEEP_QUERY + """
      for (const b of deepQueryAll('devtools-button, button')) {
        const label = (b.getAttribute('aria-label') || b.title || '').toLowerCase();
        if (label.includes('sidebar') && (label.includes('hide') || label.includes('collapse') || label.includes('close'))) { b.click(); break; }
      }""")
    time.sleep(0.5)
    # Escape also opens the console drawer: close it again.
    cdp.evaluate(DEEP_QUERY + "deepQueryAll('[aria-label=\"Close drawer\"]').forEach(b => b.click())")
    time.sleep(1)
    rect = cdp.evaluate(DEEP_QUERY + """
      (() => { const c = deepQueryAll('.flame-chart-main-pane canvas, .timeline-flamechart canvas')
                   .find(c => c.offsetWidth > 0);
               const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()""")
    left, top = rect[0], rect[1]
    click(cdp, left + 12, top + PROCESS_ROW_Y)  # the first process's header, under the time ruler
    time.sleep(0.5)
    # Its tracks, one header row each below it: expanded from the last up, so that the rows above stay put.
    for i in reversed(range(tracks)):
        click(cdp, left + 20, top + FIRST_TRACK_ROW_Y + ROW_PX * i)
        time.sleep(0.2)


def key(cdp, key, code, vk, modifiers=0):
    cdp.call("Input.dispatchKeyEvent", type="rawKeyDown", key=key, code=code, windowsVirtualKeyCode=vk,
             modifiers=modifiers)
    cdp.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk, modifiers=modifiers)


def search(cdp, term, width, height):
    """The Performance panel's search (Ctrl+F in the flame chart): returns its "1 of N" label."""
    click(cdp, width // 2, height // 2)  # focus the flame chart
    key(cdp, "f", "KeyF", 70, modifiers=2)
    time.sleep(0.5)
    key(cdp, "a", "KeyA", 65, modifiers=2)  # replace an earlier term
    cdp.call("Input.insertText", text=term)
    time.sleep(3)  # the panel searches after a debounce
    label = cdp.evaluate(DEEP_QUERY + "deepQueryAll('.search-results-matches').map(e => e.textContent).join('')")
    count = label.rsplit(" of ", 1)[-1] if label else "0"
    key(cdp, "Escape", "Escape", 27)
    return f"{count} matches"


def first_process_tracks(trace):
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    pid = next(e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name")
    return sum(1 for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid)


def show_window(cdp, trace, start_ms, end_ms):
    """Drags across the overview strip from start_ms to end_ms (from the trace's first event)."""
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    timed = [e for e in events if e["ph"] in ("X", "I", "B", "E")]
    first = min(e["ts"] for e in timed)
    last = max(e["ts"] + e.get("dur", 0) for e in timed)
    rect = cdp.evaluate(DEEP_QUERY + """
      (() => { const c = deepQueryAll('.timeline-overview-panel canvas, #timeline-overview-pane canvas, .overview-grid-window canvas, canvas')
                   .filter(c => c.offsetWidth > 0).sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)[0];
               const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()""")
    left, top, width, height = rect
    x0 = left + width * (start_ms * 1000) / (last - first)
    x1 = left + width * (end_ms * 1000) / (last - first)
    y = top + height / 2
    cdp.call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y, button="left", clickCount=1)
    for k in range(1, 11):
        cdp.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0 + (x1 - x0) * k / 10, y=y, button="left",
                 buttons=1)
    cdp.call("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y, button="left", clickCount=1)


if __name__ == "__main__":
    main()
