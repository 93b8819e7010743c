"""A small JSON Schema validator for the keywords the test schemas use (draft-07 subset).

Keywords: ``type``, ``enum``, ``const``, ``required``, ``properties``, ``additionalProperties``
(boolean), ``items`` (one schema), ``minimum``, ``pattern``, ``anyOf`` and local ``$ref``
(``#/definitions/NAME``).  Any other keyword is an error, so a schema cannot silently ask for a
check this validator does not make.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}
_KNOWN = {
    "$comment", "$ref", "type", "enum", "const", "required", "properties", "additionalProperties",
    "items", "minimum", "pattern", "anyOf", "definitions",
}  # fmt: skip


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def errors(value: Any, schema: dict, root: dict | None = None, path: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``value``, as ``"path: message"`` (empty: valid)."""
    root = schema if root is None else root
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"schema at {path} uses unsupported keywords {sorted(unknown)}")
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/definitions/")
        return errors(value, root["definitions"][name], root, path)
    out: list[str] = []
    if "type" in schema and not _is_type(value, schema["type"]):
        return [f"{path}: expected {schema['type']}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "minimum" in schema and _is_type(value, "number") and value < schema["minimum"]:
        out.append(f"{path}: {value} < minimum {schema['minimum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        out.append(f"{path}: {value!r} does not match {schema['pattern']!r}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{path}: missing required {key!r}")
        props = schema.get("properties", {})
        for key, sub in props.items():
            if key in value:
                out += errors(value[key], sub, root, f"{path}.{key}")
        if schema.get("additionalProperties") is False:
            extra = set(value) - set(props)
            if extra:
                out.append(f"{path}: unexpected keys {sorted(extra)}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += errors(item, schema["items"], root, f"{path}[{i}]")
    if "anyOf" in schema:
        branches = [errors(value, sub, root, path) for sub in schema["anyOf"]]
        if all(branches):
            best = min(branches, key=len)
            out.append(f"{path}: matches no allowed form; closest: {'; '.join(best[:3])}")
    return out
