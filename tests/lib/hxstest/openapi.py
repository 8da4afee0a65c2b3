"""Checks served responses against docs/openapi.yaml."""

from __future__ import annotations

import re
from typing import Any, Dict

import pytest

from .paths import ROOT

OPENAPI = ROOT / "docs" / "openapi.yaml"


class OpenAPI:
    """Checks a served response against docs/openapi.yaml: the path, method and status
    are documented, and the body matches the schema (a small validator for the subset
    the document uses: type, nullable, required, properties, additionalProperties,
    items, enum, minimum, pattern, $ref)."""

    def __init__(self, doc: Dict[str, Any]):
        self.doc = doc

    def _resolve(self, node: Dict[str, Any]) -> Dict[str, Any]:
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            cur: Any = self.doc
            for part in ref[2:].split("/"):
                cur = cur[part]
            node = cur
        return node

    def validate(self, value: Any, schema: Dict[str, Any], where: str = "$") -> None:
        schema = self._resolve(schema)
        if value is None:
            assert schema.get("nullable", False), f"{where}: null where the schema does not allow it"
            return
        t = schema.get("type")
        checks = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
        }
        if t:
            assert checks[t](value), f"{where}: {value!r} is not of type {t}"
        if "enum" in schema:
            assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
        if "minimum" in schema:
            assert value >= schema["minimum"], f"{where}: {value!r} < minimum {schema['minimum']}"
        if "pattern" in schema:
            assert re.search(schema["pattern"], value), f"{where}: {value!r} does not match {schema['pattern']}"
        if t == "object":
            props = schema.get("properties", {})
            for req in schema.get("required", []):
                assert req in value, f"{where}: required field {req!r} missing in {value!r}"
            extra = schema.get("additionalProperties", True)
            for k, v in value.items():
                if k in props:
                    self.validate(v, props[k], f"{where}.{k}")
                elif extra is False:
                    raise AssertionError(f"{where}: field {k!r} not in the schema")
                elif isinstance(extra, dict):
                    self.validate(v, extra, f"{where}.{k}")
        if t == "array" and "items" in schema:
            for i, v in enumerate(value):
                self.validate(v, schema["items"], f"{where}[{i}]")

    def check(self, method: str, path: str, status: int, headers: Dict[str, str], body: Any) -> None:
        paths = self.doc["paths"]
        assert path in paths, f"{path} is not documented"
        op = paths[path].get(method.lower())
        assert op is not None, f"{method} {path} is not documented"
        resp = op["responses"].get(str(status))
        assert resp is not None, f"{method} {path} -> {status} is not documented"
        resp = self._resolve(resp)
        for name, h in (resp.get("headers") or {}).items():
            h = self._resolve(h)
            assert name.lower() in headers, f"{method} {path} -> {status}: header {name} missing"
            sch = self._resolve(h["schema"])
            raw = headers[name.lower()]
            self.validate(int(raw) if sch.get("type") == "integer" else raw, sch, f"header {name}")
        content = resp.get("content") or {}
        if not content:
            return
        ctype = headers.get("content-type", "").split(";")[0].strip()
        assert ctype in content, f"{method} {path} -> {status}: content type {ctype!r} not documented"
        self.validate(body, content[ctype]["schema"], f"{method} {path} {status}")


    def check_events(self, method: str, path: str, events) -> None:
        """Checks the events of a text/event-stream 200 answer, [(name, parsed data)]:
        each name is one the document lists under x-events, its data matches the
        schema given there."""
        resp = self._resolve(self.doc["paths"][path][method.lower()]["responses"]["200"])
        media = (resp.get("content") or {}).get("text/event-stream")
        assert media is not None, f"{method} {path} -> 200: text/event-stream not documented"
        known = media.get("x-events") or {}
        for i, (name, data) in enumerate(events):
            assert name in known, f"{method} {path}: event {name!r} not documented (x-events)"
            self.validate(data, known[name], f"{method} {path} event[{i}] {name}")


def load_openapi() -> OpenAPI:
    """docs/openapi.yaml as an OpenAPI checker; fails the test without python3-yaml."""
    try:
        import yaml  # Debian python3-yaml
    except ImportError:  # pragma: no cover - the setup script installs it
        pytest.fail("python3-yaml is needed to read docs/openapi.yaml (apt-get install python3-yaml)")
    with open(OPENAPI, encoding="utf-8") as f:
        return OpenAPI(yaml.safe_load(f))
