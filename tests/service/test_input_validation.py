"""Issue 20: no bad request gets a 5xx, and nothing invalid reaches the command log.

Every request here was found by attacking a real server; each is sent to a real
``neardup serve`` process and must get a 4xx whose body says what was wrong and the
fix.  After all of them the tenant still works, and still works after a restart (a
command the apply step cannot apply would stop the tenant at start-up).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from neardup.core._errors import InvalidConfig
from neardup.service.models import json_schemas, validate
from neardup.service.models import requests as models
from neardup.service.models.checks import check_json
from service_helpers import Server

CONFIG = {
    "threshold": 0.75,
    "shingle": "word:2",
    "num_perm": 32,
    "bands": 32,
    "rows": 1,
    "retain": "text",
}
TENANT = "acme"


def _key(op: httpx.Client, role: str) -> str:
    r = op.post("/v1/keys", json={"role": role, "tenants": [TENANT]})
    assert r.status_code == 200, r.text
    token: str = r.json()["token"]
    return token


def _refused(r: httpx.Response, status: int, *words: str) -> dict[str, str]:
    """A 4xx answer in the error shape: a message naming what was wrong, and a fix."""
    assert r.status_code == status, (r.request.method, r.request.url, r.status_code, r.text)
    body: dict[str, str] = r.json()
    assert set(body) == {"error", "message", "fix"}, body
    assert all(isinstance(v, str) and v for v in body.values()), body
    for w in words:
        assert w in body["message"], (w, body)
    return body


def _raw(client: httpx.Client, method: str, url: str, body: bytes) -> httpx.Response:
    return client.request(method, url, content=body, headers={"content-type": "application/json"})


def _works(p: httpx.Client, item_id: str) -> None:
    """The tenant still takes writes and reads them back."""
    r = p.post(
        f"/v1/tenants/{TENANT}/items",
        json={"item_id": item_id, "content": f"fresh words for {item_id} after the attack"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "inserted"
    assert p.get(f"/v1/tenants/{TENANT}/items/{_enc(item_id)}").status_code == 200


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    srv = Server(tmp_path / "data", operator_tenants=(TENANT,)).start()
    try:
        with srv.client(srv.operator_token) as op:
            r = op.put(f"/v1/tenants/{TENANT}", json=CONFIG)
            assert r.status_code == 200, r.text
        yield srv
    finally:
        srv.stop()


@pytest.mark.slow
def test_poison_commands_are_refused_before_the_log(server: Server) -> None:
    """Defect 1: an out-of-range epoch (SQLite INTEGER is signed 64-bit) and a lone
    surrogate in source_time were logged, then failed to apply: the tenant broke."""
    items = f"/v1/tenants/{TENANT}/items"
    with server.client(server.operator_token) as op, server.client(_key(op, "producer")) as p:
        r = p.post(items, json={"item_id": "E1", "content": "one two three"})
        assert r.status_code == 200, r.text
        seq = p.get(f"/v1/tenants/{TENANT}").json()["seq"]

        r = p.delete(f"{items}/E1?epoch=9223372036854775808")
        _refused(r, 400, "epoch", "9223372036854775808", "9223372036854775807")
        r = p.delete(f"{items}/E1?epoch=-1")
        _refused(r, 400, "epoch")
        body = b'{"item_id": "S1", "content": "four five six", "source_time": "\\ud800"}'
        r = _raw(p, "POST", items, body)
        _refused(r, 400, "source_time", "lone surrogate")
        # Also for an integer field of a body (decision_seq is looked up in SQLite).
        with server.client(_key(op, "reviewer")) as rev:
            r = rev.post(
                f"/v1/tenants/{TENANT}/labels",
                json={"decision_seq": 2**63, "label": "duplicate"},
            )
            _refused(r, 400, "decision_seq")
            r = rev.post(
                f"/v1/tenants/{TENANT}/labels",
                json={"decision_seq": 10**30, "label": "duplicate"},
            )
            _refused(r, 400, "decision_seq", "64-bit")

        # Nothing was logged: the sequence did not move, and the tenant works.
        assert p.get(f"/v1/tenants/{TENANT}").json()["seq"] == seq
        # The largest epoch SQLite stores is accepted.
        r = p.delete(f"{items}/E1?epoch=9223372036854775807")
        assert r.status_code == 200, r.text
        assert r.json()["epoch"] == 2**63 - 1
        _works(p, "after-poison")
        digest = op.get(f"/v1/tenants/{TENANT}/digest").json()

    server.stop()
    server.start()
    with server.client(server.operator_token) as op, server.client(_key(op, "producer")) as p:
        assert op.get(f"/v1/tenants/{TENANT}/digest").json() == digest
        assert p.get(f"{items}/E1").json()["live"] is False
        _works(p, "after-restart")


SLASHED = ["a/b", "a/b/content", "x/", "/lead", "p%2Fq", "é/ü ?#&", "items/a/decision"]


@pytest.mark.slow
def test_ids_with_a_slash_are_read_back_and_deleted(server: Server) -> None:
    """Defect 2: ids holding "/" could be stored but never read or deleted.  An id is
    any text; in a path it is percent-encoded, "/" as %2F, and routing keeps an
    encoded "/" inside its segment (so item "a/b/content" is not item "a/b")."""
    items = f"/v1/tenants/{TENANT}/items"
    with server.client(server.operator_token) as op:
        p, rev = server.client(_key(op, "producer")), server.client(_key(op, "reviewer"))
        with p, rev:
            for i, item_id in enumerate(SLASHED):
                content = " ".join(f"w{i}x{j}" for j in range(8))  # disjoint documents
                r = p.post(items, json={"item_id": item_id, "content": content})
                assert r.status_code == 200, r.text
                assert r.json()["decision"]["state"] == "unique", r.text
            for item_id in SLASHED:
                path = f"{items}/{_enc(item_id)}"
                r = p.get(path)
                assert r.status_code == 200, (item_id, r.text)
                assert r.json()["item_id"] == item_id and r.json()["live"] is True
                r = p.get(f"{path}/decision")
                assert r.status_code == 200 and r.json()["item_id"] == item_id, r.text
                r = rev.get(f"{path}/content")
                assert r.status_code == 200 and r.json()["item_id"] == item_id, r.text
                # Reached the item (not linked as a duplicate: 409, not 404).
                _refused(rev.post(f"{path}/unlink", json={}), 409, repr(item_id))
                _refused(rev.post(f"{path}/release", json={}), 409, repr(item_id))
            # An unencoded "/" is a path separator, as always: no such route or item.
            assert p.get(f"{items}/a/b").status_code == 404
            # A path that is not UTF-8 once decoded is refused, not guessed at.
            _refused(p.get(f"{items}/%FF"), 400, "UTF-8")
            for item_id in SLASHED[:3]:
                r = p.delete(f"{items}/{_enc(item_id)}")
                assert r.status_code == 200 and r.json()["item_id"] == item_id, r.text
                assert p.get(f"{items}/{_enc(item_id)}").json()["live"] is False
            _works(p, "s/after")

    server.stop()
    server.start()
    with server.client(server.operator_token) as op, server.client(_key(op, "producer")) as p:
        for item_id in SLASHED:
            r = p.get(f"{items}/{_enc(item_id)}")
            assert r.status_code == 200, r.text
            assert r.json()["live"] is (item_id not in SLASHED[:3])
        _works(p, "s/after/restart")


def _enc(item_id: str) -> str:
    from urllib.parse import quote

    return quote(item_id, safe="")


@pytest.mark.slow
def test_bad_input_gets_a_4xx_with_the_fix(server: Server) -> None:
    """Defect 3: each of these was a 500."""
    t = f"/v1/tenants/{TENANT}"
    with server.client(server.operator_token) as op:
        p, rev = server.client(_key(op, "producer")), server.client(_key(op, "reviewer"))
        with p, rev:
            r = p.post(f"{t}/items", json={"item_id": "E1", "content": "a b c"})
            assert r.status_code == 200, r.text
            # "²" passes str.isdigit() but not int().
            _refused(p.delete(f"{t}/items/E1?epoch=%C2%B2"), 400, "epoch", "²")
            _refused(rev.get(f"{t}/decisions?after=%C2%B2"), 400, "after", "²")
            _refused(op.get(f"{t}/decisions?limit=%C2%B2"), 400, "limit")
            _refused(op.get(f"{t}/decisions?limit=0"), 400, "limit")
            # Nested deeper than json.loads can recurse, and deeper than any request.
            deep = b"[" * 100_000 + b"]" * 100_000
            _refused(_raw(p, "POST", f"{t}/items", deep), 400, "nested too deeply")
            _refused(_raw(p, "POST", f"{t}/items", b"[" * 40 + b"]" * 40), 400, "nested")
            # Authorization before the body: a producer learns nothing about it.
            keys = {"tenants": True, "role": None}
            _refused(p.post("/v1/keys", json=keys), 403, "may not")
            _refused(op.post("/v1/keys", json=keys), 400, "body.role")
            keys = {"role": "producer", "tenants": True}
            _refused(op.post("/v1/keys", json=keys), 400, "body.tenants")
            _refused(p.put(f"{t}/policy", json=[None, None]), 403, "may not")
            _refused(op.put(f"{t}/policy", json=[None, None]), 400, "policy", "JSON object")
            _refused(op.put(f"{t}/shadow", json={"shingle": {}}), 400, "config.shingle", "string")
            _refused(op.put(f"{t}/shadow", json={"shingle": "word:²"}), 400, "config.shingle")
            _refused(op.put(f"{t}", json={"shingle": {"a": 1}}), 400, "config.shingle")
            _refused(op.put(f"{t}", json={"num_perm": "128"}), 400, "config.num_perm")
            for field in ("item_id", "idempotency_key", "content"):
                doc = {"item_id": "L1", "content": "seven eight nine"}
                body = _json_with(doc, field, '"bad \\udc00 text"')
                _refused(_raw(p, "POST", f"{t}/items", body), 400, f"body.{field}", "surrogate")
                _refused(_raw(p, "POST", f"{t}/decide", body), 400, f"body.{field}", "surrogate")
            # A surrogate pair is one valid character: accepted.
            pair = _json_with({"item_id": "L1"}, "content", '"emoji \\ud83d\\ude00 here"')
            assert _raw(p, "POST", f"{t}/items", pair).status_code == 200
            nan = b'{"item_id": "N", "content": NaN}'
            _refused(_raw(p, "POST", f"{t}/items", nan), 400, "NaN")
            _refused(_raw(p, "POST", f"{t}/items", b'{"\\ud800": 1}'), 400, "surrogate")
            _refused(p.post(f"{t}/items", json={"item_id": "x" * 257, "content": "a"}), 400, "257")
            _refused(p.post(f"{t}/items", json={"item_id": "", "content": "a"}), 400, "item_id")
            _refused(
                p.delete(f"{t}/items/E1", headers={"Idempotency-Key": "k" * 257}),
                400,
                "idempotency_key",
            )
            _refused(p.post(f"{t}/verify", json={"left": 1, "right": "E1"}), 400, "body.left")
            _refused(p.post(f"{t}/verify", json=[1]), 400, "JSON object")
            _refused(rev.post(f"{t}/items/E1/release", json=[]), 400, "JSON object")
            _refused(rev.post(f"{t}/items/E1/release", json={"of": 5}), 400, "body.of")
            _refused(rev.post(f"{t}/items/E1/unlink", json={"rationale": "r" * 2001}), 400)
            label = {"label": "duplicate", "left": True, "right": "E1"}
            _refused(rev.post(f"{t}/labels", json=label), 400, "body.left")
            _refused(
                p.post(f"{t}/items", json={"item_id": "u", "content_uri": "file:///tmp/a%00b"}),
                400,
                "content_uri",
            )
            _works(p, "after-bad-input")

    server.stop()
    server.start()
    with server.client(server.operator_token) as op, server.client(_key(op, "producer")) as p:
        _works(p, "after-bad-input-restart")


def _json_with(doc: dict[str, str], field: str, raw_value: str) -> bytes:
    """``doc`` as JSON with ``field`` set to a raw JSON text (escapes kept as sent)."""
    import json

    rest = {k: v for k, v in doc.items() if k != field}
    inner = json.dumps(rest)[1:-1]
    sep = ", " if inner else ""
    return f'{{"{field}": {raw_value}{sep}{inner}}}'.encode()


def test_contract_agrees_with_the_server(server: Server) -> None:
    """Defect 4: the OpenAPI document and the server's answers agree."""
    t = f"/v1/tenants/{TENANT}"
    spec = httpx.get(f"{server.url}/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert schemas["Error"]["required"] == ["error", "message", "fix"]
    assert "limit" not in schemas["UpsertRequest"]["properties"]
    assert "limit" not in schemas["DecideRequest"]["properties"]
    assert "limit" in schemas["QueryRequest"]["properties"]
    decide = spec["paths"]["/v1/tenants/{tenant}/decide"]["post"]["requestBody"]
    assert decide["content"]["application/json"]["schema"]["$ref"].endswith("/DecideRequest")
    params = spec["paths"]["/v1/tenants/{tenant}/items/{item_id}"]["delete"]["parameters"]
    epoch = next(x for x in params if x["name"] == "epoch")["schema"]
    assert (epoch["minimum"], epoch["maximum"]) == (0, 2**63 - 1)
    params = spec["paths"]["/v1/tenants/{tenant}/decisions"]["parameters"]
    after = next(x for x in params if x["name"] == "after")["schema"]
    assert (after["minimum"], after["maximum"]) == (0, 2**63 - 1)
    with server.client(server.operator_token) as op, server.client(_key(op, "producer")) as p:
        # limit on items / decide: not in their schemas, refused as unknown.
        body = {"item_id": "Q", "content": "ten eleven", "limit": 3}
        _refused(p.post(f"{t}/items", json=body), 400, "limit", "not a known field")
        _refused(p.post(f"{t}/decide", json=body), 400, "limit", "not a known field")
        r = p.post(f"{t}/candidates", json={"content": "ten eleven", "limit": 3})
        assert r.status_code == 200, r.text
        # Optional fields sent as null mean absent, as they always did.
        nulls = dict.fromkeys(("content_uri", "source_time", "idempotency_key"))
        body = {"item_id": "n", "content": "twelve thirteen", **nulls}
        assert p.post(f"{t}/items", json=body).status_code == 200
        # Errors without a fix attribute (here EmptyDocument) still carry one.
        fix = _refused(p.post(f"{t}/items", json={"item_id": "e", "content": "  "}), 422)["fix"]
        assert "drop it" in fix
        # 405 says which methods the path has (all of them, not one route's).
        r = p.patch(f"{t}/items/Q")
        _refused(r, 405)
        assert r.headers["allow"] == "DELETE, GET, HEAD"
        r = p.delete(f"{t}/policy")
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, PUT"
        _works(p, "contract")


def test_check_json_limits() -> None:
    check_json({"a": [1, -(2**63), 2**63 - 1, 0.5, "é", None, True]})
    for bad in ({"a": 2**63}, {"a": float("inf")}, ["\ud800"], {"\udfff": 1}):
        with pytest.raises(InvalidConfig):
            check_json(bad)
    doc: list[object] = []
    for _ in range(40):
        doc = [doc]
    with pytest.raises(InvalidConfig, match="nested"):
        check_json(doc)


AGREEMENT = [
    ("UpsertRequest", {"item_id": "a", "content": "x"}, True),
    ("UpsertRequest", {"item_id": "a", "content_uri": None, "normalization_version": None}, True),
    ("UpsertRequest", {"content": "x"}, False),
    ("UpsertRequest", {"item_id": "a", "limit": 3}, False),
    ("UpsertRequest", {"item_id": "", "content": "x"}, False),
    ("UpsertRequest", {"item_id": "a", "media_type": "text/rtf"}, False),
    ("UpsertRequest", {"item_id": "a", "normalization_version": True}, False),
    ("UpsertRequest", {"item_id": "a", "tenant_id": "acme\n"}, False),
    ("QueryRequest", {"content": "x", "limit": 3}, True),
    ("QueryRequest", {"content": "x", "limit": 0}, False),
    ("DecideRequest", {"content": "x", "replace": 1}, False),
    ("VerifyRequest", {"left": "a", "right": "b"}, True),
    ("VerifyRequest", {"left": "a"}, False),
    ("KeyRequest", {"role": "producer", "tenants": ["acme"]}, True),
    ("KeyRequest", {"role": "producer", "tenants": ["acme\n"]}, False),
    ("KeyRequest", {"role": "producer", "tenants": []}, False),
    ("KeyRequest", {"role": "admin", "tenants": ["acme"]}, False),
    ("TenantConfig", {"threshold": 1, "bands": None, "rows": 4, "rate_per_s": 1}, True),
    ("TenantConfig", {"shingle": "word:5\n"}, False),
    ("TenantConfig", {"threshold": 0}, False),
    ("TenantConfig", {"num_perm": True}, False),
    ("TenantConfig", {"max_bucket_size": 1}, False),
    ("Policy", {"version": 2, "metric": "jaccard", "review_below": 0.5}, True),
    ("Policy", {"metric": "cosine"}, False),
    ("ResolveRequest", {"as": "duplicate", "of": "b", "rationale": "r"}, True),
    ("ResolveRequest", {"rationale": "r" * 2001}, False),
    ("LabelRequest", {"left": "a", "right": "b", "label": "unsure"}, True),
    ("LabelRequest", {"decision_seq": 0, "label": "unsure"}, False),
]


@pytest.mark.parametrize(("name", "body", "valid"), AGREEMENT)
def test_validation_and_the_published_schemas_agree(name: str, body: object, valid: bool) -> None:
    """The server validates with the models the document publishes: a body is
    refused by both or by neither (the published patterns end the text as the
    server does: no final newline)."""
    import jsonschema

    published = jsonschema.Draft202012Validator(json_schemas()[name]).is_valid(body)
    message = ""
    try:
        validate(getattr(models, name), body, "body")
    except InvalidConfig as exc:
        message = str(exc)
    assert (not message, published) == (valid, valid), message
    assert not message or (message.startswith("invalid body") and "; fix: " in message)
