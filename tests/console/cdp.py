"""A headless Chromium (Debian's /usr/bin/chromium) driven through the DevTools protocol
over a pipe (--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4), so the
test needs no WebSocket client and no browser download. Standard library only.

One Browser has one page. It records what a test asserts against: JavaScript dialogs
(alert, confirm: dismissed at once), uncaught exceptions, console errors and the
browser's log (Content-Security-Policy violations land there).
"""
import atexit
import base64
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time

CHROMIUM = os.environ.get("RANKD_CHROMIUM", "/usr/bin/chromium")


class Browser:
    def __init__(self, width=1280, height=900, timeout=20):
        self.timeout = timeout
        # Chromium may still write into its profile as it exits: cleanup ignores that.
        self.profile = tempfile.TemporaryDirectory(prefix="rankd-chromium-", ignore_cleanup_errors=True)
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds_3_and_4():
            # Through fds >= 10 first, so that neither dup2 overwrites the other's source.
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile.name}", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--mute-audio", "--hide-scrollbars",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=fds_3_and_4)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.closed = False
        atexit.register(self.close)  # also when a test fails half-way
        self.buffer = b""
        self.next_id = 0
        self.session = None
        self.dialogs = []     # messages of JavaScript dialogs opened
        self.errors = []      # uncaught exceptions and console errors
        self.log = []         # the browser's log entries (CSP violations among them)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # --- the protocol ---------------------------------------------------------------

    def send(self, method, params=None, timeout=None):
        """Sends one command and returns its result; events read meanwhile are handled."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read(end, method)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _read(self, end, what):
        while b"\0" not in self.buffer:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise AssertionError(f"chromium did not answer {what} in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise AssertionError(f"chromium exited (status {self.proc.poll()}) during {what}")
            self.buffer += chunk
        msg, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(msg)

    def _event(self, ev):
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Page.javascriptDialogOpening":
            self.dialogs.append(params.get("message"))
            # Answered from the loop that reads: a dialog left open would block the page.
            self.next_id += 1
            os.write(self.to_browser, json.dumps({"id": self.next_id, "sessionId": self.session,
                     "method": "Page.handleJavaScriptDialog", "params": {"accept": False}}).encode() + b"\0")
        elif method == "Runtime.exceptionThrown":
            self.errors.append(params["exceptionDetails"].get("exception", {}).get("description")
                               or params["exceptionDetails"].get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded":
            self.log.append(params["entry"].get("text"))

    # --- what tests call -------------------------------------------------------------

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise AssertionError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=10, what=None):
        """Polls until the expression is truthy; returns its value."""
        end = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {timeout}s waiting for {what or expression}")
            time.sleep(0.05)

    def goto(self, url):
        """Opens a URL; a change of the hash only is a hashchange for the page, as in a browser."""
        self.send("Page.navigate", {"url": url})

    def text(self, selector):
        return self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? null")

    def type(self, selector, text):
        """Focuses a field, clears it and types the text as keyboard input."""
        self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); e.select(); }})()")
        self.send("Input.insertText", {"text": text})

    def click(self, selector):
        """A real mouse click at the centre of the element."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView(); "
                            "const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})

    def screenshot(self, path):
        """The whole page (not only the window) as PNG."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                         "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.send("Browser.close", timeout=5)
        except (AssertionError, RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        self.profile.cleanup()
