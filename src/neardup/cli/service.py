"""The service commands: ``neardup serve``, ``apikey``, ``repair`` and ``route``."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from neardup.cli.common import (
    Decorator,
    errors,
    needs_extra,
    options,
    ready_kernels,
)
from neardup.core._errors import InvalidConfig

__all__ = ["apikey", "repair", "route", "serve"]


def _service_config(opts: dict[str, Any]) -> Any:

    from neardup.service.manager import ServiceConfig

    data_dir = os.path.abspath(opts["data_dir"])
    return ServiceConfig(
        data_dir=data_dir,
        master_key_file=opts["master_key_file"] or data_dir.rstrip(os.sep) + ".master.key",
        keys_file=opts["keys_file"] or data_dir.rstrip(os.sep) + ".keys.json",
        max_body_bytes=opts.get("max_body_bytes") or 1 << 20,
        max_candidates=opts.get("max_candidates") or 100,
        content_roots=tuple(os.path.abspath(r) for r in opts.get("content_root") or ()),
        audit_sample_rate=(
            0.01 if opts.get("audit_sample_rate") is None else opts["audit_sample_rate"]
        ),
        audit_interval_s=60.0 if opts.get("audit_interval") is None else opts["audit_interval"],
        request_budget_s=opts.get("request_budget") or 5.0,
    )


_service_paths = options(
    click.option("--data-dir", required=True, help="Data directory (created if absent)."),
    click.option(
        "--master-key-file",
        default=None,
        help="Master secret file, outside the data directory [default: DATA_DIR.master.key].",
    ),
    click.option(
        "--keys-file",
        default=None,
        help="API key file (hashed keys), outside the data directory "
        "[default: DATA_DIR.keys.json].",
    ),
)
_HOST = click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
_LOG_LEVEL = click.option(
    "--log-level", default="warning", show_default=True, help="uvicorn log level."
)


def _port(default: int) -> Decorator:
    return click.option("--port", default=default, show_default=True, type=int, help="TCP port.")


@click.command()
@_service_paths
@_HOST
@_port(8731)
@click.option(
    "--content-root",
    multiple=True,
    help="Folder that content_uri (file://) may read from; repeatable. Default: none.",
)
@click.option(
    "--max-body-bytes",
    type=int,
    default=1 << 20,
    show_default=True,
    help="Largest JSON request body.",
)
@click.option(
    "--max-candidates",
    type=int,
    default=100,
    show_default=True,
    help="Server cap on candidates per query.",
)
@click.option(
    "--operator-tenant",
    multiple=True,
    help="On first start, issue an operator key for these tenants (repeatable).",
)
@click.option(
    "--bootstrap-token-file",
    default=None,
    help="Write the first-start operator token here (mode 0600) instead of stderr.",
)
@click.option(
    "--audit-sample-rate",
    type=float,
    default=0.01,
    show_default=True,
    help="Share of queries that also run an exact search in the background "
    "(measured recall: neardup_audit_misses_total).",
)
@click.option(
    "--audit-interval",
    type=float,
    default=60.0,
    show_default=True,
    help="At most one exact audit per tenant per this many seconds.",
)
@click.option(
    "--request-budget",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds a write may take before it is logged (waiting included); "
    "past it: 503 deadline_exceeded and nothing is recorded.",
)
@_LOG_LEVEL
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes, each serving the tenants a stable hash of the tenant id "
    "gives it, behind one front process on --port; 1: a single process. "
    "[default: the number of CPUs]",
)
def serve(**opts: Any) -> None:
    """Run the multi-tenant dedup service (HTTP + JSON) over an embedded store.

    On first start it creates the master secret and an operator API key (printed
    once, or written to --bootstrap-token-file); nothing else needs to run.

    Example: neardup serve --data-dir ./nd-data --operator-tenant acme --port 8731
    """

    with needs_extra("service"):
        import uvicorn

        from neardup.service.manager import Service
        from neardup.service.server import create_app
        from neardup.service.workers import default_workers
    workers = opts["workers"] or default_workers()
    ready_kernels("service")
    with errors():
        cfg = _service_config(opts)
        token = None
        if not os.path.exists(cfg.keys_file):
            token = Service.bootstrap(cfg, operator_tenants=list(opts["operator_tenant"]))
        if workers == 1:
            svc = Service(cfg)
        else:
            _check_service_files(cfg)
        if token is not None:
            if opts["bootstrap_token_file"]:
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                fd = os.open(opts["bootstrap_token_file"], flags, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(token + "\n")
            else:
                click.echo(f"operator API key (shown once): {token}", err=True)
    if workers == 1:
        app = create_app(svc, close_on_shutdown=True)
        uvicorn.run(app, host=opts["host"], port=opts["port"], log_level=opts["log_level"])
        return
    _serve_front(opts, cfg, workers)


def _check_service_files(cfg: Any) -> None:
    """What a single-process start checks first (master key, key file, audit log), so
    that a bad file stops ``serve --workers N`` with the same message."""

    from neardup.service.auth import AuditLog, Keyring
    from neardup.service.manager.config import load_master

    load_master(cfg.master_key_file)
    Keyring.load(cfg.keys_file)
    os.makedirs(os.path.join(cfg.data_dir, "tenants"), exist_ok=True)
    AuditLog(os.path.join(cfg.data_dir, "audit.jsonl"))


def _serve_front(opts: dict[str, Any], cfg: Any, workers: int) -> None:
    import uvicorn

    from neardup.service.workers import Front, worker_command

    def worker_cmd(index: int, socket: str) -> list[str]:
        return worker_command(cfg, index, workers, socket, log_level=opts["log_level"])

    front = Front(worker_cmd, workers, cfg.data_dir, cfg.keys_file)
    uvicorn.run(
        front,
        host=opts["host"],
        port=opts["port"],
        log_level=opts["log_level"],
        lifespan="on",
        # The workers' answers carry their own Date and Server headers.
        server_header=False,
        date_header=False,
    )


@click.command()
@_service_paths
@click.option(
    "--role",
    type=click.Choice(["producer", "reviewer", "operator"]),
    required=True,
    help="Role of the new key.",
)
@click.option(
    "--tenant",
    "tenants",
    multiple=True,
    required=True,
    help="Tenant the key is scoped to (operators: repeatable).",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="Access policy whose items' content the key may read (repeatable); without "
    "it the key may read items of any policy.",
)
def apikey(**opts: Any) -> None:
    """Issue an API key offline (the server rereads keys at start); prints the token once.

    Example: neardup apikey --data-dir ./nd-data --role producer --tenant acme
    (a reviewer allowed only items of access policy "eu": --role reviewer --policy eu)
    """
    from neardup.service.auth import Keyring

    with errors():
        cfg = _service_config(opts)
        # Locked and reread: a running server may be adding keys to the same file.
        token = Keyring().add_saved(
            cfg.keys_file,
            opts["role"],
            list(opts["tenants"]),
            policies=list(opts["policies"]) if opts["policies"] else None,
        )
    click.echo(token)


@click.command()
@_service_paths
@click.option("--tenant", required=True, help="The tenant to examine.")
@click.option(
    "--rebase",
    is_flag=True,
    help="Rebuild a damaged command log from the tenant's feature store (a new "
    "generation; the damaged log is kept beside it).",
)
@click.option(
    "--accept-loss",
    is_flag=True,
    help="With --rebase: go ahead although the store lacks commands the log held.",
)
def repair(**opts: Any) -> None:
    """Examine one tenant of a data directory offline, and repair what is safe.

    Without options it only reports (JSON): "ok" (opening repaired what is safe by
    itself: a torn log tail is trimmed, a damaged store rebuilt from a snapshot and
    the log), or "damaged" with the file, the reason and the next step.  A server
    may keep running while its failed tenant is repaired; a tenant the server has
    open is refused.  After a repair: POST /v1/tenants/TENANT/reopen.  Exit codes:
    0 ok or repaired, 3 damaged (nothing changed), 2 bad parameter or refused.

    Example: neardup repair --data-dir ./nd-data --tenant acme --rebase
    """
    import os

    from neardup.service.manager.config import load_master
    from neardup.service.migration import load_tenant, read_pointer
    from neardup.service.tenant import Tenant, valid_tenant_id

    with errors():
        cfg = _service_config(opts)
        name = valid_tenant_id(opts["tenant"])
        root = os.path.join(cfg.data_dir, "tenants", name)
        if not os.path.isdir(root):
            raise InvalidConfig("tenant", name, f"has no folder under {cfg.data_dir}", "check it")
        master = load_master(cfg.master_key_file)
        live = os.path.normpath(os.path.join(root, read_pointer(root)["live"]))
        report = Tenant.repair(live, master, rebase=opts["rebase"], accept_loss=opts["accept_loss"])
        if report["status"] == "ok":
            # The companion version (shadow or previous) must open too.
            t, mig = load_tenant(root, master)
            t.close()
            if mig.other is not None:
                mig.other.close()
    click.echo(json.dumps({"tenant": name, **report}, indent=1, sort_keys=True, default=str))
    sys.exit(3 if report["status"] == "damaged" else 0)


@click.command()
@click.option("--table", required=True, help="Routing table JSON (tenant id -> backend URL).")
@_HOST
@_port(8730)
@_LOG_LEVEL
def route(**opts: Any) -> None:
    """Forward each tenant's requests to the `neardup serve` process that owns it.

    The table is {"format": "neardup-routes-v1", "tenants": {"acme": "http://host:8731"}}.

    Example: neardup route --table routes.json --port 8730
    """
    with needs_extra("service"):
        import uvicorn

        from neardup.service.router import RoutingTable, create_router
    with errors():
        table = RoutingTable.load(opts["table"])
    uvicorn.run(
        create_router(table), host=opts["host"], port=opts["port"], log_level=opts["log_level"]
    )
