"""The versioned results schema (result.schema.json) and a validator for the subset of JSON Schema
it uses, so that reading results needs no extra dependency.

The validator refuses any keyword it does not implement (`SchemaError`), so the schema file can
never hold a rule that is silently left unchecked. Supported: type, enum, const, required,
properties, additionalProperties, items, minimum, exclusiveMinimum, minLength, pattern, $ref
(local "#/$defs/..."), allOf, anyOf, if/then/else; annotations ($schema, $id, title,
description, $defs) are ignored.
"""
from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources

RESULT_SCHEMA = "portcheck.result/1"
ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs", "$comment"}
KEYWORDS = {"type", "enum", "const", "required", "properties", "additionalProperties", "items",
            "minimum", "exclusiveMinimum", "minLength", "pattern", "$ref", "allOf", "anyOf",
            "if", "then", "else"}


class SchemaError(Exception):
    """The schema file itself uses something this validator does not implement."""


class Invalid(ValueError):
    """A document does not match the schema; the message names the path and the rule."""


def _is_type(value, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float))
    raise SchemaError(f"unknown JSON type {name!r}")


def _show(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_keywords(schema, where: str = "#") -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema must be an object or a boolean")
    unknown = set(schema) - KEYWORDS - ANNOTATIONS
    if unknown:
        raise SchemaError(f"{where}: keyword(s) {', '.join(sorted(unknown))} not supported by "
                          "portcheck.schema; extend the validator before using them")
    for key in ("properties", "$defs"):
        for name, sub in schema.get(key, {}).items():
            _check_keywords(sub, f"{where}/{key}/{name}")
    for key in ("additionalProperties", "items", "if", "then", "else"):
        if key in schema:
            _check_keywords(schema[key], f"{where}/{key}")
    for key in ("allOf", "anyOf"):
        for i, sub in enumerate(schema.get(key, [])):
            _check_keywords(sub, f"{where}/{key}/{i}")


class Validator:
    def __init__(self, schema: dict):
        _check_keywords(schema)
        self.root = schema

    def _resolve(self, ref: str) -> dict:
        if not ref.startswith("#/"):
            raise SchemaError(f"only local $ref like '#/$defs/x' is supported, not {ref!r}")
        node = self.root
        for part in ref[2:].split("/"):
            node = node[part]
        return node

    def errors(self, value, schema=None, path: str = "") -> list[str]:
        """Every violation, as 'path: problem' (an empty list when the value is valid)."""
        schema = self.root if schema is None else schema
        if schema is True:
            return []
        if schema is False:
            return [f"{path or '<record>'}: not allowed"]
        where = path or "<record>"
        if "$ref" in schema:
            errs = self.errors(value, self._resolve(schema["$ref"]), path)
            if errs:
                return errs
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_is_type(value, t) for t in types):
                return [f"{where}: expected {' or '.join(types)}, got {_show(value)}"]
        if "const" in schema and value != schema["const"]:
            return [f"{where}: must be {_show(schema['const'])}, got {_show(value)}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {_show(value)} is not one of {', '.join(map(_show, schema['enum']))}"]
        errs: list[str] = []
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and not (value >= schema["minimum"] or math.isnan(value)):
                errs.append(f"{where}: {value} is below the minimum {schema['minimum']}")
            if "exclusiveMinimum" in schema and not value > schema["exclusiveMinimum"]:
                errs.append(f"{where}: {value} must be greater than {schema['exclusiveMinimum']}")
        if isinstance(value, str):
            if len(value) < schema.get("minLength", 0):
                errs.append(f"{where}: must not be empty" if schema["minLength"] == 1
                            else f"{where}: shorter than {schema['minLength']} characters")
            if "pattern" in schema and not re.search(schema["pattern"], value):
                errs.append(f"{where}: {_show(value)} does not match {schema['pattern']}")
        if isinstance(value, dict):
            for key in schema.get("required", []):
                if key not in value:
                    errs.append(f"{where}: missing required field '{key}'")
            props = schema.get("properties", {})
            extra = schema.get("additionalProperties", True)
            for key, sub in value.items():
                sub_path = f"{path}.{key}" if path else key
                if key in props:
                    errs += self.errors(sub, props[key], sub_path)
                elif extra is not True:
                    errs += self.errors(sub, extra, sub_path)
        if isinstance(value, list) and "items" in schema:
            for i, item in enumerate(value):
                errs += self.errors(item, schema["items"], f"{where}[{i}]")
        for sub in schema.get("allOf", []):
            errs += self.errors(value, sub, path)
        if "anyOf" in schema:
            tries = [self.errors(value, sub, path) for sub in schema["anyOf"]]
            if all(tries):
                errs += min(tries, key=len)
        if "if" in schema:
            branch = "then" if not self.errors(value, schema["if"], path) else "else"
            if branch in schema:
                errs += self.errors(value, schema[branch], path)
        return errs

    def validate(self, value) -> None:
        errs = self.errors(value)
        if errs:
            more = f" (and {len(errs) - 3} more)" if len(errs) > 3 else ""
            raise Invalid("; ".join(errs[:3]) + more)


@lru_cache(maxsize=None)
def result_schema() -> dict:
    return json.loads(resources.files(__package__).joinpath("result.schema.json").read_text("utf-8"))


@lru_cache(maxsize=None)
def result_validator() -> Validator:
    return Validator(result_schema())


def check_result(record) -> None:
    """Raise Invalid with a readable message unless `record` is a valid portcheck.result/1 dict.

    A record of another schema version gets its own message: it is not a broken record but one
    this portcheck cannot read.
    """
    if not isinstance(record, dict):
        raise Invalid(f"a record must be a JSON object, got {_show(record)}")
    version = record.get("schema")
    if version != RESULT_SCHEMA:
        if isinstance(version, str) and version.startswith("portcheck.result/"):
            raise Invalid(f"schema version {version!r} is not one this portcheck reads "
                          f"({RESULT_SCHEMA}); use the portcheck that wrote it, or a newer one")
        raise Invalid(f"not a portcheck result record (schema {_show(version)}, expected {RESULT_SCHEMA!r})")
    result_validator().validate(record)
