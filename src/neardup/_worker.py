"""Entry point of one ``neardup serve --workers N`` worker process (started by the front).

``python -m neardup._worker SPEC``: see :func:`neardup.workers.worker_command`.
"""

from __future__ import annotations

import sys

from ._launch import process_defaults

if __name__ == "__main__":
    process_defaults()
    from .workers import worker_main

    worker_main(sys.argv[1:])
