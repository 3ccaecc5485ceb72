"""The one line of a terminal that a progress display redraws in place.

A run shows its progress on one line of stderr, redrawn with a carriage return; log records go to
the same stream. `LiveLine` keeps the two apart: while the line is shown, a log record written to
that stream first wipes it, so the record starts on its own line (the progress comes back with its
next redraw). On a stream that is not a terminal there is no live line: progress displays write
whole lines instead.
"""
from __future__ import annotations

import logging
from typing import TextIO


class LiveLine:
    """A line redrawn in place on a terminal `stream`, wiped before any log record written to it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._width = 0                  # characters shown now (0: none)
        self._guard = _WipeBeforeLogs(self)
        self._guarded: list[logging.Handler] = []

    def show(self, text: str) -> None:
        """Draw `text` over what the line showed (terminals only)."""
        if not self.tty:
            return
        if not self._guarded:
            self._guard_handlers()
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def wipe(self) -> None:
        """Blank the line and put the cursor at its start (nothing when it shows nothing)."""
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def close(self) -> None:
        """Wipe the line; log records go to the stream as they are again."""
        self.wipe()
        for handler in self._guarded:
            handler.removeFilter(self._guard)
        self._guarded = []

    def _guard_handlers(self) -> None:
        """Have every logging handler writing to this stream wipe the line before its records."""
        handlers = [h for h in logging.getLogger().handlers if getattr(h, "stream", None) is self.stream]
        for handler in handlers:
            handler.addFilter(self._guard)
        self._guarded = handlers


class _WipeBeforeLogs(logging.Filter):
    """Lets every record through, wiping the live line first."""

    def __init__(self, line: LiveLine) -> None:
        super().__init__()
        self.line = line

    def filter(self, record: logging.LogRecord) -> bool:
        self.line.wipe()
        return True
