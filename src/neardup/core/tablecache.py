"""Code-point tables derived from Python's Unicode database, kept between runs.

The tokenizer's word classes (:mod:`neardup.text.words`) and the script detector's
table (:mod:`neardup.text.scripts`) are arrays over every code point, built from
``unicodedata`` with hundreds of thousands of lookups: about a tenth of a second
each, paid by every process that hashes text.  :func:`cached_table` builds a
table once and keeps it in a checksummed container (:mod:`neardup.core.persist`)
in the package's ``__pycache__`` folder, where Python keeps its bytecode.

Guarantees:

* the table returned is always the one ``build`` returns on this interpreter: the
  file's name carries the Unicode database version and the SHA-256 of the module
  that builds the table, so a new Python or an edited module never reads an old
  table;
* a damaged, truncated or foreign file is never used (the container's checksum
  and kind are verified; then the table is built again and the file rewritten);
* a cache folder that cannot be written (a read-only installation) only costs the
  build: nothing is raised;
* the array is read-only.

>>> import tempfile
>>> t = cached_table("demo", __file__, lambda: np.arange(4, dtype=np.uint8),
...                  folder=tempfile.mkdtemp())
>>> t.tolist(), t.flags.writeable
([0, 1, 2, 3], False)
"""

from __future__ import annotations

import functools
import hashlib
import os
import unicodedata
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from neardup.core._errors import NeardupError
from neardup.core.persist import read_container, write_container

__all__ = ["cached_table"]

_KIND = "neardup-code-point-table"


def cached_table(
    name: str,
    source: str,
    build: Callable[[], npt.NDArray[np.uint8]],
    *,
    folder: str | None = None,
) -> npt.NDArray[np.uint8]:
    """The table ``build()`` makes, read from the cache when an intact copy made
    by the same ``source`` file under the same Unicode version is there.

    ``folder`` defaults to ``neardup/__pycache__``.
    """
    path = os.path.join(folder or _default_folder(), _file_name(name, source))
    table: npt.NDArray[np.uint8] | None = None
    if os.path.exists(path):
        try:
            meta, arrays = read_container(path, _KIND)
            got = arrays.get("table")
            if meta.get("name") == name and got is not None and got.dtype == np.uint8:
                table = got
        except NeardupError:
            table = None  # damaged or foreign: built again below, file replaced
    if table is None:
        table = np.ascontiguousarray(build(), dtype=np.uint8)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_container(path, _KIND, {"name": name}, {"table": table})
        except (OSError, NeardupError):
            pass  # a read-only installation: every process builds its own
    table.flags.writeable = False
    return table


def _default_folder() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "__pycache__")


@functools.cache
def _file_name(name: str, source: str) -> str:
    with open(source, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    return f"{name}.unicode-{unicodedata.unidata_version}.{digest}.table"
