"""One tenant of the service: its scheme, keys, command log, feature store and index.

A tenant's data directory::

    tenant.json              configuration, scheme and key fingerprints
    CURRENT                  which generation of store + log is live (atomic switch)
    features-<gen>.sqlite    canonical features (SQLite, WAL; sealed blobs)
    log-<gen>.ndlog          the command log since that generation began
    snapshots/snap-<seq>.ndsnap

Guarantees:

* **Isolation.**  Every tenant has its own shingle key (keyed SipHash, derived
  from the master secret), store, log and index; nothing here can read another
  tenant's files, and every sealed blob is bound to the tenant id.
* **Durability.**  A state change is acknowledged only after its command is in
  the log and fsynced.  Start-up replays the log after the store's last applied
  command; a torn tail (the last record cut short) is trimmed (``trimmed_bytes``
  is reported), a damaged record — in the middle or the last one — stops start-up
  with the file and offset (see :mod:`neardup.service.cmdlog` for the exact rule).  A
  feature store that fails to open, any of its checks at open (SQLite integrity,
  schema, row checksums: see :mod:`neardup.service.store`) or any read during start-up,
  or that lags behind the log's start, is set aside and rebuilt from the latest
  snapshot that verifies and that the log continues (``recovered`` in
  :meth:`Tenant.stats`), then the log is replayed after it; with no such snapshot
  start-up stops and says so, rather than serve partial state.
* **Determinism.**  Positions and sequence numbers are assigned in command order,
  candidates are ordered by (score desc, item id), and replaying the same log
  gives the same :meth:`Tenant.digest`.
* **Precision.**  A candidate's ``score`` is the exact Jaccard similarity of the
  stored shingle-hash sets — never an estimate.  Recall is that of the LSH layout:
  a pair at the threshold is a candidate with probability ``predicted_recall``
  (reported with every decision); "no candidate" is never proof of uniqueness.
"""

from __future__ import annotations

from neardup.service.tenant.config import (
    SERVICE_SCHEME,
    Candidate,
    Prepared,
    TenantConfig,
    valid_tenant_id,
)
from neardup.service.tenant.config import SNAPSHOT_FORMAT as SNAPSHOT_FORMAT
from neardup.service.tenant.config import Guard as Guard
from neardup.service.tenant.core import Tenant

__all__ = [
    "SERVICE_SCHEME",
    "Candidate",
    "Prepared",
    "Tenant",
    "TenantConfig",
    "valid_tenant_id",
]
