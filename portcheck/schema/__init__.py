"""The versioned results schema (result.schema.json), checked with jsonschema under the draft the
file declares in `$schema` (2020-12).

Every reader validates records on read (portcheck.reports.grid); `Invalid` carries a one-line
message naming the field and the rule, which the reader prefixes with the file and line.
jsonschema is imported on first use, so a machine without it (the GPU box reaches no package
registry) can still run and benchmark; only reading results needs it.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources

from ..errors import UsageError

RESULT_SCHEMA = "portcheck.result/1"
MOST_ERRORS = 3      # a message names this many violations, then counts the rest
LONGEST_ERROR = 160  # characters of one violation (a value can be a whole record)


class Invalid(ValueError):
    """A document does not match the schema; the message names the path and the rule."""


def _show(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _validator_class(schema: dict):
    """The draft `schema` declares, with one addition: JSON has no NaN but Python's json reads
    it, and a NaN is greater than nothing (a NaN time is no measurement)."""
    try:
        from jsonschema import validators
        from jsonschema.exceptions import ValidationError
    except ImportError:
        raise UsageError("reading results needs the jsonschema package: pip install jsonschema") from None
    draft = validators.validator_for(schema)
    draft.check_schema(schema)   # SchemaError when the schema file itself is malformed
    plain = draft.VALIDATORS["exclusiveMinimum"]

    def exclusive_minimum(validator, bound, instance, sub):
        if validator.is_type(instance, "number") and math.isnan(instance):
            yield ValidationError(f"{instance!r} is not greater than {bound!r}")
        else:
            yield from plain(validator, bound, instance, sub)
    return validators.extend(draft, {"exclusiveMinimum": exclusive_minimum})


@lru_cache(maxsize=None)
def result_schema() -> dict:
    return json.loads(resources.files(__package__).joinpath("result.schema.json").read_text("utf-8"))


@lru_cache(maxsize=None)
def result_validator():
    schema = result_schema()
    return _validator_class(schema)(schema)


def _path(error) -> str:
    """`metrics.max_ulp`, `lints[0].rule`; `<record>` for the record itself."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<record>"


def _violations(errors) -> list:
    """The errors, with each anyOf failure replaced by the errors of its closest alternative (of
    the right type, then the fewest errors), so `override` names the field that is wrong rather
    than saying it is not null."""
    out = []
    for error in errors:
        if error.context:
            branches: dict = {}
            for sub in error.context:
                branches.setdefault(sub.relative_schema_path[0], []).append(sub)
            out += _violations(min(branches.values(), key=lambda errs: (
                any(e.validator == "type" and not e.relative_path for e in errs), len(errs))))
        else:
            out.append(error)
    return out


def _describe(error) -> str:
    message = " ".join(error.message.split())
    if len(message) > LONGEST_ERROR:
        message = message[:LONGEST_ERROR - 3] + "..."
    return f"{_path(error)}: {message}"


def check_result(record) -> None:
    """Raise Invalid with a readable one-line message unless `record` is a valid
    portcheck.result/1 dict.

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
    validator = result_validator()
    from jsonschema.exceptions import relevance
    errors = _violations(sorted(validator.iter_errors(record), key=relevance, reverse=True))
    if errors:
        more = f" (and {len(errors) - MOST_ERRORS} more)" if len(errors) > MOST_ERRORS else ""
        raise Invalid("; ".join(_describe(e) for e in errors[:MOST_ERRORS]) + more)
