"""A request's query string, parsed strictly: only the names a route knows, each once, each value of its
kind (digits, a date, a zone, an id, ...); anything else is a one-line 400."""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Optional

from .contract import ID_RE, MAX_DIGITS, id_problem
from .errors import bad_request


def parse_query(query: str, allowed: dict[str, str]) -> dict[str, str]:
    """`allowed` maps a parameter name to its kind: "digits", "bool", "date", "zone", "text", "word", "id".
    Unknown names, repeats, empty values and anything percent-encoded or malformed are a 400."""
    values: dict[str, str] = {}
    if not query:
        return values
    for part in query.split("&"):
        name, equals, value = part.partition("=")
        if name not in allowed:
            shown = json.dumps(name[:40])
            raise bad_request(f"query parameter {shown} is not known here (known: {', '.join(sorted(allowed)) or 'none'})")
        if name in values:
            raise bad_request(f"{name}: given more than once")
        kind = allowed[name]
        if not equals or not value:
            raise bad_request(f"{name}: a value is required")
        if kind == "digits":
            if not (value.isascii() and value.isdigit()) or len(value) > MAX_DIGITS:
                raise bad_request(f"{name}: must be digits only, at most {MAX_DIGITS} (got {json.dumps(value[:40])})")
        elif kind == "bool":
            if value not in ("true", "false"):
                raise bad_request(f"{name}: must be true or false (got {json.dumps(value[:40])})")
        elif kind == "date":
            if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value, re.ASCII):
                raise bad_request(f"{name}: must be a date YYYY-MM-DD (got {json.dumps(value[:40])})")
        elif kind == "zone":
            value = urllib.parse.unquote(value)
            if not re.fullmatch(r"[A-Za-z0-9_+\-/]{1,64}", value, re.ASCII):
                raise bad_request(f"{name}: must be an IANA time zone like Europe/Zurich (got {json.dumps(value[:40])})")
        elif kind == "text":
            value = urllib.parse.unquote_plus(value)
        elif kind == "id":
            if ID_RE.fullmatch(value) is None:
                raise bad_request(id_problem(value, name))
        elif kind == "word":
            if value not in ("all", "current"):
                raise bad_request(f"{name}: must be all or current (got {json.dumps(value[:40])})")
        values[name] = value
    return values


def bounded_int(values: dict[str, str], name: str, default: int, maximum: Optional[int]) -> int:
    if name not in values:
        return default
    number = int(values[name])
    if maximum is not None and number > maximum:
        raise bad_request(f"{name}: must be at most {maximum} (got {number})")
    return number
