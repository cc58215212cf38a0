"""GET /openapi.json: the OpenAPI 3.1 schema, generated from the wire types in contract.py."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from .. import answers, contract
from ..app import Context, json_response
from .digests import MAX_DAYS_PER_PAGE, MAX_SAMPLES_PER_PAGE


def _error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorAnswer"}}}}


def _ok(name: str, description: str = "OK") -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}


def _body(name: str) -> dict:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}


def _query(name: str, description: str, schema: dict) -> dict:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


COMMON_ERRORS = {
    "400": _error("invalid input; the message names the field (e.g. samples[3].count)"),
    "401": _error("missing, unknown or revoked token"),
    "413": _error(f"body over {contract.MAX_BODY_BYTES} bytes"),
    "500": _error('internal error: {"error":"internal error","requestId":"…"}; details are in the server log'),
    "503": _error("storage cannot take writes now, or too many bodies in flight; see Retry-After"),
}


def build_schema() -> dict[str, Any]:
    types = [contract.StepsBody, contract.DeletionsBody, answers.StepsPage, answers.SavedAnswer,
             answers.DeletedAnswer, answers.ClearedAnswer, answers.HealthAnswer, answers.ErrorAnswer,
             answers.DailyDocument, answers.UploaderDigest, answers.DayDigestsPage, answers.DaySamplesPage,
             contract.LookupBody, answers.LookupAnswer]
    _, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    years = "(199[0-9]|[2-9][0-9]{3})" if (contract.MIN_DAILY_YEAR, contract.MAX_DAILY_YEAR) == (1990, 9998) else None
    assert years, "the day pattern below spells MIN_DAILY_YEAR and MAX_DAILY_YEAR out"
    day = {"type": "string", "format": "date", "pattern": f"^{years}-[0-9]{{2}}-[0-9]{{2}}$"}
    pattern = f"[ \\t]*=?[^,=\\t ]([^,]{{0,{contract.MAX_PRIORITY_PATTERN_BYTES - 3}}}[^,\\t ])?[ \\t]*"  # not empty, not "="
    priority = {"type": "string", "pattern": f"^{pattern}(,{pattern}){{0,{contract.MAX_PRIORITY_PATTERNS - 1}}}$"}
    an_id = {"type": "string", "pattern": contract.ID_PATTERN}
    uploader = {**_query("uploader", "the client's store id", an_id), "required": True}
    utc_day = {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "StepSync API server",
            "version": "2",
            "description": "Receives step samples from StepSync. Every endpoint but GET /health needs "
            "Authorization: Bearer <token> (unless the server runs --single-user). Query strings are strict: "
            "known names only, each at most once, digits only for numbers. Duplicate keys in a JSON object are a 400.",
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {"get": {"security": [], "summary": "200 only when storage takes writes now",
                                "responses": {"200": _ok("HealthAnswer"), "503": _ok("HealthAnswer", "storage refuses writes")}}},
            "/steps": {
                "post": {"summary": f"save up to {contract.MAX_SAMPLES_PER_REQUEST} samples; idempotent by (user, id)",
                         "requestBody": _body("StepsBody"), "responses": {"200": _ok("SavedAnswer"), **COMMON_ERRORS}},
                "get": {"summary": "a page of the current live version of each id (every version with versions=all)",
                        "parameters": [
                            _query("limit", f"default {contract.DEFAULT_LIMIT}, at most {contract.MAX_LIMIT}",
                                   {"type": "integer", "minimum": 0, "maximum": contract.MAX_LIMIT}),
                            _query("offset", "default 0", {"type": "integer", "minimum": 0, "maximum": 10 ** contract.MAX_DIGITS - 1}),
                            _query("versions", "all: every version saved, in the order received", {"enum": ["all", "current"]}),
                        ],
                        "responses": {"200": _ok("StepsPage"), **COMMON_ERRORS}},
                "delete": {"summary": "empty the caller's data (nobody else's)",
                           "responses": {"200": _ok("ClearedAnswer"), **COMMON_ERRORS}},
            },
            "/steps/daily": {
                "get": {"summary": "daily totals merged across sources (docs/TOTALS.md)",
                        "parameters": [
                            _query("tz", "IANA time zone, default UTC", {"type": "string", "pattern": "^[A-Za-z0-9_+\\-/]{1,64}$"}),
                            {**_query("from", "first day, YYYY-MM-DD", day), "required": True},
                            {**_query("to", f"last day, inclusive, not before from; at most {contract.MAX_DAILY_DAYS} days", day), "required": True},
                            _query("bySource", "true: each row lists its sources", {"enum": ["true", "false"]}),
                            _query("priority", f"patterns separated by commas, replacing the default (at most "
                                   f"{contract.MAX_PRIORITY_PATTERNS}, none empty)", priority),
                        ],
                        "responses": {"200": _ok("DailyDocument"), **COMMON_ERRORS}},
            },
            "/steps/digest": {
                "get": {"summary": "who answers (serverId, user) and the digest of the live samples an uploader last "
                        "wrote (docs/RECONCILE.md); O(days)",
                        "parameters": [uploader],
                        "responses": {"200": _ok("UploaderDigest"), **COMMON_ERRORS}},
            },
            "/steps/digest/days": {
                "get": {"summary": "the digest of each UTC day holding samples an uploader last wrote, in day order",
                        "parameters": [
                            uploader,
                            _query("after", "the days after this one (the previous page's next)", utc_day),
                            _query("limit", f"days a page, default and at most {MAX_DAYS_PER_PAGE}",
                                   {"type": "integer", "minimum": 0, "maximum": MAX_DAYS_PER_PAGE}),
                        ],
                        "responses": {"200": _ok("DayDigestsPage"), **COMMON_ERRORS}},
            },
            "/steps/digest/samples": {
                "get": {"summary": "the ids and content hashes of the live samples an uploader last wrote that start on one "
                        "UTC day, in id order",
                        "parameters": [
                            uploader,
                            {**_query("day", "YYYY-MM-DD", utc_day), "required": True},
                            _query("after", "the ids after this one (the previous page's next)", an_id),
                            _query("limit", f"samples a page, default and at most {MAX_SAMPLES_PER_PAGE}",
                                   {"type": "integer", "minimum": 0, "maximum": MAX_SAMPLES_PER_PAGE}),
                        ],
                        "responses": {"200": _ok("DaySamplesPage"), **COMMON_ERRORS}},
            },
            "/steps/digest/lookup": {
                "post": {"summary": f"what the server knows of up to {contract.MAX_IDS_PER_REQUEST} ids: live (who wrote it, "
                         "its UTC day and content hash) or deleted (by whom); unknown ids are left out",
                         "requestBody": _body("LookupBody"), "responses": {"200": _ok("LookupAnswer"), **COMMON_ERRORS}},
            },
            "/steps/deletions": {
                "post": {"summary": f"delete up to {contract.MAX_IDS_PER_REQUEST} ids; unknown or deleted ids are "
                         "acknowledged; durable before the 200", "requestBody": _body("DeletionsBody"),
                         "responses": {"200": _ok("DeletedAnswer"), **COMMON_ERRORS}},
            },
        },
    }


def routes(context: Context) -> list:
    document = json.dumps(build_schema(), separators=(",", ":")).encode()

    async def openapi(request: Request) -> Response:
        return json_response(document)

    return [("/openapi.json", openapi, ["GET"])]
