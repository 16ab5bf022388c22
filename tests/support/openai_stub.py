"""A real, local OpenAI-compatible HTTP server for tests: POST /v1/chat/completions on 127.0.0.1.

Usage:

    from tests.support.openai_stub import OpenAIStub, Reply

    with OpenAIStub() as stub:                       # binds a free port, serves in a thread
        stub.script(
            Reply.text("hello"),                      # plain assistant text
            Reply.json({"lesson": "..."}),            # assistant text = json.dumps(obj)
            Reply.truncated('{"lesson": "par'),       # finish_reason "length"
            Reply.malformed(),                        # HTTP 200 with a body that is not JSON
            Reply.rate_limited(retry_after=0.1),      # HTTP 429 with a Retry-After header
            Reply.server_error(),                     # HTTP 500
            Reply.text("late", delay=0.5),            # any reply can be delayed (seconds)
        )
        settings = Settings(OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="test")
        ...
        stub.requests      # list of recorded request bodies (dicts), in arrival order
        stub.calls         # number of requests served

Scripted replies are served in order, one per request; when the script runs out, `default` (a
Reply, settable; initially Reply.text("ok")) answers. `stub.responder = fn` replaces scripting:
fn(request_body: dict) -> Reply decides each reply (e.g. by the prompt). Usage in replies is
counted as prompt 10 + completion 10 tokens. Only loopback is ever bound.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str = ""
    finish_reason: str = "stop"
    raw_body: bytes | None = None  # sent as is instead of a completion object
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def text(cls, content: str, delay: float = 0.0) -> Reply:
        return cls(content=content, delay=delay)

    @classmethod
    def json(cls, obj: Any, delay: float = 0.0) -> Reply:
        return cls(content=json.dumps(obj), delay=delay)

    @classmethod
    def truncated(cls, content: str, delay: float = 0.0) -> Reply:
        return cls(content=content, finish_reason="length", delay=delay)

    @classmethod
    def malformed(cls, delay: float = 0.0) -> Reply:
        return cls(raw_body=b"{this is not json", delay=delay)

    @classmethod
    def rate_limited(cls, retry_after: float = 0.1, delay: float = 0.0) -> Reply:
        body = json.dumps({"error": {"message": "rate limited", "type": "rate_limit_error"}}).encode()
        return cls(status=429, raw_body=body, headers={"Retry-After": str(retry_after)}, delay=delay)

    @classmethod
    def server_error(cls, delay: float = 0.0) -> Reply:
        body = json.dumps({"error": {"message": "internal error", "type": "server_error"}}).encode()
        return cls(status=500, raw_body=body, delay=delay)


class OpenAIStub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.default: Reply = Reply.text("ok")
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="openai-stub")

    # -- lifecycle -------------------------------------------------------------------------------------

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    # -- serving ---------------------------------------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self.responder is None and self._script:
                return self._script.pop(0)
        return self.responder(body) if self.responder else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}', {})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": True}
                reply = stub._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.raw_body if reply.raw_body is not None else _completion(body, reply)
                self._send(reply.status, payload, reply.headers)

            def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def _completion(request: dict[str, Any], reply: Reply) -> bytes:
    return json.dumps(
        {
            "id": f"chatcmpl-stub-{int(time.time() * 1000)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
    ).encode()
