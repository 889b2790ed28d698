"""Entry point of one ``neardup serve --workers N`` worker process (started by the front).

``python -m neardup.service._worker SPEC``: see :func:`neardup.service.workers.worker_command`.
"""

from __future__ import annotations

import sys

from neardup.core.procenv import process_defaults

if __name__ == "__main__":
    process_defaults()
    from neardup.service.workers import worker_main

    worker_main(sys.argv[1:])
