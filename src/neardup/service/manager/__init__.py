"""The multi-tenant dedup service as a library: tenants, auth, limits, audit, metrics.

:class:`Service` is what ``neardup serve`` puts behind HTTP (``neardup.service.server``);
it can be embedded directly too.  Every operation takes the authenticated
:class:`~neardup.service.auth.Principal` and checks its role and tenant scope first, then
limits (rate, size), then does the work on that tenant only — there is no code
path from one tenant's request to another tenant's index, store or key.

Data directory layout::

    <data_dir>/audit.jsonl          hash-chained audit log of privileged calls
    <data_dir>/tenants/<tenant>/    one tenant (see ``neardup.service.tenant``)

The master secret and the API key file live *outside* the data directory
(:class:`ServiceConfig` refuses paths inside it), so a copied data directory or
snapshot never carries the keys that decrypt it.

The class is cut by concern, like :class:`~neardup.service.tenant.Tenant`:
``config`` (:class:`ServiceConfig`, the master secret), ``core`` (:class:`Service`:
the tenant registry — open, failed, reopen, create — keys and close) over mixins
``gating`` (requests' version-gate leases, rate limits, the tenant lookup),
``intake`` (request bodies checked, ``content_uri`` fetched), ``items`` (upserts,
queries, decisions, tombstones, reads), ``review`` (policies, events, resolutions,
labels) and ``versions`` (shadow indexes, compaction, snapshots, restore), sharing
``_state``.

Example:
    >>> import tempfile, os
    >>> base = tempfile.mkdtemp()
    >>> svc, token = Service.init(ServiceConfig(data_dir=os.path.join(base, "data"),
    ...     master_key_file=os.path.join(base, "master.key"),
    ...     keys_file=os.path.join(base, "keys.json")), operator_tenants=["t1"])
    >>> op = svc.keyring.authenticate(f"Bearer {token}")
    >>> _ = svc.create_tenant(op, "t1", {"threshold": 0.75, "shingle": "word:2"})
    >>> prod = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t1"]))
    >>> _ = svc.upsert(prod, "t1", {"item_id": "A", "content": "red fox runs very fast"})
    >>> r = svc.upsert(prod, "t1", {"item_id": "B", "content": "red fox runs very fast today"})
    >>> [(c["item_id"], c["score"]) for c in r["candidates"]], r["decision"]["state"]
    ([('A', 0.8)], 'duplicate')
    >>> svc.close()
"""

from __future__ import annotations

from neardup.service.manager.config import ServiceConfig
from neardup.service.manager.core import Service

__all__ = ["Service", "ServiceConfig"]
