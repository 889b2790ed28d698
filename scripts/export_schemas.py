"""Write the service's JSON Schemas and OpenAPI document to docs/schemas/.

Both come from the models of ``neardup.service.models``: run this after changing
them; tests/service/test_schemas.py checks that the files are in sync.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from neardup.service.models import json_schemas, openapi

ROOT = Path(__file__).resolve().parents[1]


def render() -> dict[str, str]:
    out = {}
    for name, schema in sorted(json_schemas().items()):
        out[f"{name}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    out["openapi.json"] = json.dumps(openapi("0.1.0"), indent=2, sort_keys=True) + "\n"
    return out


def main() -> int:
    target = ROOT / "docs" / "schemas"
    target.mkdir(parents=True, exist_ok=True)
    files = render()
    stale = sorted(p.name for p in target.glob("*.json") if p.name not in files)
    for name in stale:
        (target / name).unlink()
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {target}" + (f", removed {stale}" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
