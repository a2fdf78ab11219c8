"""The terminal's streams: a reader that stops early (`zlbench ... | head`, `less` quit), or a
stdout on a full disk, ends what zlbench prints there, never the run or the verb.

Python ignores SIGPIPE, so a write to a pipe whose reader left raises BrokenPipeError wherever it
happens: in a run's last lines, after every node was measured, it came out as "could not write
results" (exit 2) and the run never reached the store; in `summary | head`, as a traceback and
exit 1. The run dir, zlbench.log and the store are files: a closed terminal loses nothing of them."""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO


# A stream nothing more can be written to: its reader left (EPIPE), the file it goes to is on a full
# disk (`> /dev/full`, ENOSPC, EDQUOT), its terminal is gone (EIO).
GONE = (errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO)


class _ReaderMayLeave:
    """A text stream whose writes and flushes, once its reader has left, go nowhere."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except OSError as e:
                if e.errno not in GONE:
                    raise
                self._left()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except OSError as e:
                if e.errno not in GONE:
                    raise
                self._left()

    def _left(self) -> None:
        self._gone = True
        try:  # what the stream still buffers is flushed at exit: into nothing, not the closed pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def let_readers_leave() -> None:
    """Wrap sys.stdout and sys.stderr (once) so that a reader that leaves costs nothing."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _ReaderMayLeave):
            setattr(sys, name, _ReaderMayLeave(stream))
