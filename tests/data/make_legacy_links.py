"""Build ``legacy-links-t1.tar.gz``: a tenant directory written by neardup before
clusters were handed over on tombstone (commit 23b187b), for the upgrade test.

Run it with that version's sources first on the path, e.g.::

    git archive 23b187b src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python tests/data/make_legacy_links.py

The sequence (issue 20, defect 4): X1; X2 and X5 near copies of X1; tombstone X1
(X2 and X5 keep pointing at it); X3, a near copy, is linked to the tombstoned X1;
X1 upserted again is linked to itself.  A snapshot of the final state is kept in
``snapshots/`` too.  The master key is ``service_helpers.FIXED_MASTER_KEY``.
"""

from __future__ import annotations

import os
import tarfile
import tempfile

from neardup.service._crypto import MasterSecret
from neardup.service.tenant import Tenant, TenantConfig

KEY = bytes(range(32))
CFG = TenantConfig.from_dict(
    {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
)
A = "the red fox runs very fast across the field"
B = "The red fox runs very fast across the FIELD today"


def main() -> None:
    root = os.path.join(tempfile.mkdtemp(), "t1")
    t = Tenant.create(root, "t1", CFG, MasterSecret(KEY))
    t.upsert(item_id="X1", content=A)
    t.upsert(item_id="X2", content=B)
    t.upsert(item_id="X5", content=A + " more")
    t.tombstone("X1")
    t.upsert(item_id="X3", content=A + " again")
    t.upsert(item_id="X1", content=A)
    links = t.link_state()
    assert links == {
        "X1": ("duplicate", "X1"),
        "X2": ("duplicate", "X1"),
        "X3": ("duplicate", "X1"),
        "X5": ("duplicate", "X1"),
    }, links
    t.snapshot()
    t.close()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "legacy-links-t1.tar.gz")
    with tarfile.open(out, "w:gz") as tar:
        for name in sorted(os.listdir(root)):
            tar.add(os.path.join(root, name), arcname=name)
    print(out, links)


if __name__ == "__main__":
    main()
