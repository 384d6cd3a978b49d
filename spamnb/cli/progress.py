"""One progress line on stderr, drawn only when stderr is a terminal."""

import sys
import time


class Progress:
    """A progress line: ``step(label)`` after each unit of work, ``close()`` at the end.

    ``total`` may be 0 when it is not known (a stream of messages): the line
    then shows the count alone; so it does once the count passes the total
    (an estimate, such as the files of a corpus, some of them mboxes).
    ``restart()`` begins another pass over the same items: the count starts
    from 0 again, towards what the last pass counted.  Redrawn at most every
    ``interval`` seconds (and at the last step).
    """

    def __init__(self, total=0, enabled=True, stream=None, unit="", interval=0.0):
        self.stream = sys.stderr if stream is None else stream
        self.total = total
        self.unit = unit
        self.done = 0
        self.enabled = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self.interval = interval
        self._drawn = -1e9

    def restart(self):
        """Another pass over the same items (train's second variant, say): the
        count starts again, and the total is what the last pass counted."""
        if self.done:
            self.total, self.done = self.done, 0

    def step(self, label="", n=1):
        self.done += n
        if self.total and self.done > self.total:   # the estimate was short (an mbox): the count alone
            self.total = 0
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn < self.interval and self.done != self.total:
            return
        self._drawn = now
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            width = 30
            filled = int(width * min(self.done, self.total) / self.total)
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}{unit}"
        else:
            bar = f"{self.done}{unit}"
        self.stream.write(f"\r{bar} {now - self.start:5.0f}s {label[:40]:<40}")
        self.stream.flush()

    def wrap(self, items, label=""):
        """``items`` unchanged, a step after each; closes the line at the end."""
        try:
            for item in items:
                yield item
                self.step(label)
        finally:
            self.close()

    def close(self):
        if self.enabled:
            self.stream.write("\r" + " " * 90 + "\r")
            self.stream.flush()
