"""A real OpenAI-compatible HTTP server on loopback that answers from a script.

Each scripted entry is one of:
  ("ok", text)              200 with a chat completion holding ``text`` (and usage)
  ("status", code)          an error status (429, 500, 503 ...)
  ("sleep", seconds, text)  answer after a delay (a timeout when longer than the client's)
  ("close",)                drop the connection without answering
When the script runs out, ``default`` is used (None: HTTP 503).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeLLM:
    def __init__(self, script: list[tuple] | None = None, default: tuple | None = None) -> None:
        self.script: deque[tuple] = deque(script or [])
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner.lock:
                    owner.requests.append({"path": self.path, "body": body,
                                           "auth": self.headers.get("Authorization", "")})
                    entry = owner.script.popleft() if owner.script else owner.default
                if entry is None:
                    return self._send(503, {"error": {"message": "script exhausted"}})
                kind = entry[0]
                if kind == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return None
                if kind == "status":
                    return self._send(entry[1], {"error": {"message": f"scripted {entry[1]}"}})
                if kind == "sleep":
                    time.sleep(entry[1])
                    entry = ("ok", entry[2])
                prompt_tokens = sum(len(m.get("content", "")) for m in body.get("messages", [])) // 4
                text = entry[1]
                return self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "m"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text) // 4,
                              "total_tokens": prompt_tokens + len(text) // 4}})

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def push(self, *entries: tuple) -> None:
        with self.lock:
            self.script.extend(entries)

    def __enter__(self) -> "FakeLLM":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
