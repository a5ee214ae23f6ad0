"""How a `g3align` process ends when it is told to stop or its reader leaves, as bwa's users expect.

* **Ctrl-C, SIGTERM, SIGHUP**: the signals are blocked in every thread of the process but one, which waits
  for them (`install`). When one comes that thread, at once and whatever the others are running (compiled
  kernels included), stops the compile processes it started, lets the output finish the record batch being
  written and flushes it (the output ends at a whole record; a BAM gets its end-of-file block), removes the
  temporary files in progress (an index being written), and lets the signal end the process as it ends bwa:
  killed by it, so the shell sees 130 or 143. No traceback, no message.
* **A broken pipe** (`| head`): SIGPIPE's default action, as in bwa: the process ends silently at the write
  that found no reader (with `set -o pipefail` the pipeline's status is 141).

The CLI calls `install()` at its start (after the split of `--device gpu` runs into a worker, whose parent
passes the signals on)."""
from __future__ import annotations

import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TEMP: set = set()        # paths being written (or glob patterns, with '*'), removed on a stop
CHILDREN: list = []      # subprocess.Popen objects, killed on a stop
SINKS: list = []         # open outputs (samhdr.OutputSink): abort() on a stop
_installed = False


def install() -> None:
    """Block SIGINT/SIGTERM/SIGHUP here (threads started from now on inherit it) and start the thread that
    waits for them; SIGPIPE back to its default action. Idempotent; call before starting other threads."""
    global _installed
    if _installed:
        return
    _installed = True
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for sig in SIGNALS:  # their default action (death) once stop() lets them through (no KeyboardInterrupt)
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    threading.Thread(target=_wait, name="g3align-signals", daemon=True).start()


def _wait() -> None:
    sig = signal.sigwait(SIGNALS)
    stop(sig)


def leave(code: int) -> None:
    """End the process now with exit status `code` (after an error line), with stop()'s clean-up: no interpreter
    teardown while reader and pool threads still run compiled code."""
    _clean()
    import sys
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None:
                f.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def stop(sig: int) -> None:
    """End the process as `sig` would, after the clean-up in the module docstring."""
    _clean()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    signal.pthread_kill(threading.get_ident(), sig)
    os._exit(128 + sig)  # not reached


def _clean() -> None:
    for p in list(CHILDREN):
        try:
            p.kill()
        except OSError:
            pass
    for s in list(SINKS):
        try:
            s.abort(timeout=0.5)
        except Exception:  # noqa: BLE001 (a broken output: nothing more to save)
            pass
    import glob
    for pat in list(TEMP):
        for path in glob.glob(pat) if "*" in pat else [pat]:
            try:
                os.unlink(path)
            except OSError:
                pass
