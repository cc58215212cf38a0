"""Every request goes through Starlette's normal stack: a middleware added the ordinary way
(add_middleware, as CORS, GZip, metrics or auth would be) sees every route, and what it adds to an
answer reaches the client. In process, through the app's ASGI interface."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from starlette.middleware.gzip import GZipMiddleware  # noqa: E402

from conftest import call, make_samples  # noqa: E402
from stepserver.app import create_app  # noqa: E402
from stepserver.settings import Settings  # noqa: E402
from stepserver.storage import open_storage  # noqa: E402


class Recorder:
    """ASGI middleware: notes every request it sees and marks every answer."""

    def __init__(self, app, seen: list) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def marking_send(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-seen-by", b"recorder")]
                self.seen.append((scope["method"], scope["path"], message["status"]))
            await send(message)

        await self.app(scope, receive, marking_send)


def test_a_middleware_added_the_ordinary_way_sees_every_route(tmp_path):
    store = open_storage(tmp_path / "data", None, pool_size=2)
    try:
        app = create_app(Settings(data=tmp_path / "data", single_user=True), store)
        seen: list = []
        app.add_middleware(Recorder, seen=seen)
        app.add_middleware(GZipMiddleware, minimum_size=10)
        samples = json.dumps({"samples": make_samples(3)}).encode()
        requests = [
            ("GET", "/health", b"", b""),
            ("POST", "/steps", samples, b""),
            ("GET", "/steps", b"", b"limit=2"),
            ("POST", "/steps/deletions", b'{"ids":["x"]}', b""),
            ("GET", "/steps/daily", b"", b"from=2024-01-01&to=2024-01-31"),
            ("GET", "/openapi.json", b"", b""),
            ("GET", "/", b"", b""),
            ("DELETE", "/steps", b"", b""),
            ("POST", "/steps", b"{", b""),
            ("GET", "/nowhere", b"", b""),
            ("PUT", "/steps", b"", b""),
        ]
        answers = [call(app, method, path, body, query, [(b"accept-encoding", b"gzip")]) for method, path, body, query in requests]
        assert [(method, path) for method, path, _ in seen] == [(method, path) for method, path, _, _ in requests]
        assert [status for _, _, status in seen] == [200, 200, 200, 200, 200, 200, 200, 200, 400, 404, 405]
        assert all(headers.get("x-seen-by") == "recorder" for _, headers, _ in answers)
        assert answers[5][1].get("content-encoding") == "gzip"  # the schema is long enough to compress
    finally:
        store.close()
