"""Run a module as ``__main__`` under cProfile (the main thread's CPU time) and write
its stats when it ends, a SIGTERM included: ``python bench/_profiled.py OUT MODULE
[ARGS...]``.

``python -m cProfile -o OUT -m MODULE`` writes nothing for a server stopped by
SIGTERM: uvicorn, once it has shut down, raises the signal it caught again with the
handler it found, and the default handler ends the process before cProfile writes.
Here that handler is ``sys.exit``, so the profile is written.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from pathlib import Path


def main() -> None:
    out, module, *args = sys.argv[1:]
    # The repository, not bench/ (whose gateway.py is the benchmark), first on the path.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.argv = [module, *args]
    # The event loop thread's CPU time: what it computes, not what it waits for.
    profiler = cProfile.Profile(time.thread_time)
    try:
        profiler.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
