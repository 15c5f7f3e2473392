"""A base for the real local HTTP servers the back-end tests talk to, kept honest: a fake answers
only routes the real API documents (DOCUMENTED, by the API each fake speaks); a success on any
other route is refused (HTTP 599 and recorded in UNDOCUMENTED), so a fake cannot grow a route
our client would call and the real server does not have."""

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (method, path pattern) per API, from each API's own reference: OpenAI's API reference (chat,
# models, files, batches); Gemini's REST reference (models.generateContent,
# models.batchGenerateContent, batches, media.upload with its resumable session URL, files);
# llama.cpp's server README (/health, /v1/models, /v1/chat/completions); vLLM's serving docs
DOCUMENTED = {
    "openai": [
        ("POST", r"/v1/chat/completions"),
        ("GET", r"/v1/models"),
        ("POST", r"/v1/files"),
        ("GET", r"/v1/files"),
        ("GET", r"/v1/files/[^/]+"),
        ("GET", r"/v1/files/[^/]+/content"),
        ("DELETE", r"/v1/files/[^/]+"),
        ("POST", r"/v1/batches"),
        ("GET", r"/v1/batches"),
        ("GET", r"/v1/batches/[^/]+"),
        ("POST", r"/v1/batches/[^/]+/cancel"),
    ],
    "gemini": [
        ("POST", r"/v1beta/models/[^/:]+:generateContent"),
        ("POST", r"/v1beta/models/[^/:]+:batchGenerateContent"),
        ("GET", r"/v1beta/batches"),
        ("GET", r"/v1beta/batches/[^/]+"),
        ("POST", r"/v1beta/batches/[^/:]+:cancel"),
        ("DELETE", r"/v1beta/batches/[^/]+"),
        ("POST", r"/upload/v1beta/files"),
        ("POST", r"/session/[^/]+"),  # the upload URL the start request's X-Goog-Upload-URL hands out
        ("GET", r"/v1beta/files"),
        ("GET", r"/v1beta/files/[^/]+"),
        ("DELETE", r"/v1beta/files/[^/]+"),
    ],
    "llama.cpp": [("GET", r"/health"), ("GET", r"/v1/models"), ("POST", r"/v1/chat/completions")],
    # Anthropic's API reference: Messages, Message Batches (and its results), token counting, models
    "anthropic": [
        ("POST", r"/v1/messages"),
        ("POST", r"/v1/messages/count_tokens"),
        ("POST", r"/v1/messages/batches"),
        ("GET", r"/v1/messages/batches"),
        ("GET", r"/v1/messages/batches/[^/]+"),
        ("GET", r"/v1/messages/batches/[^/]+/results"),
        ("POST", r"/v1/messages/batches/[^/]+/cancel"),
        ("DELETE", r"/v1/messages/batches/[^/]+"),
        ("GET", r"/v1/models"),
    ],
    # vLLM's OpenAI-compatible server (its docs' "Tokenizer API" and /version)
    "vllm": [("GET", r"/version"), ("POST", r"/tokenize"), ("GET", r"/v1/models"), ("POST", r"/v1/chat/completions")],
}
UNDOCUMENTED: list = []  # (fake, method, path) a fake tried to answer with a success
SERVED: set = set()  # (api, method, pattern) answered during the session
_lock = threading.Lock()


def documented(api: str, method: str, path: str) -> str | None:
    """The documented pattern that `method path` (query stripped) matches, or None."""
    bare = path.split("?", 1)[0]
    return next((p for m, p in DOCUMENTED[api] if m == method and re.fullmatch(p, bare)), None)


class JsonHandler(BaseHTTPRequestHandler):
    api = "openai"  # the API this fake speaks (DOCUMENTED)

    def log_message(self, *args):
        pass

    def send_json(self, code, obj, headers=None):
        if code < 400:
            pattern = documented(self.api, self.command, self.path)
            with _lock:
                if pattern is None:
                    UNDOCUMENTED.append((type(self).__name__, self.command, self.path))
                else:
                    SERVED.add((self.api, self.command, pattern))
            if pattern is None:
                code, obj = 599, {"error": f"{self.command} {self.path}: not a route the real {self.api} API documents"}
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def page(items: list, query: str, id_key: str = "id", default_limit: int = 20) -> dict:
    """An OpenAI list page: `limit` items after the id `after`, with first_id, last_id and has_more,
    as the real list endpoints answer (GET /v1/files, GET /v1/batches)."""
    from urllib.parse import parse_qs

    q = parse_qs(query)
    limit = int(q.get("limit", [default_limit])[0])
    after = q.get("after", [None])[0]
    start = next((i + 1 for i, it in enumerate(items) if it[id_key] == after), 0) if after else 0
    data = items[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0][id_key] if data else None,
        "last_id": data[-1][id_key] if data else None,
        "has_more": start + limit < len(items),
    }


def chat_completion(content: str, usage: dict, model: str = "x") -> dict:
    """An OpenAI chat.completion body with one choice."""
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": usage,
    }


@contextmanager
def serving(handler: type) -> Iterator[str]:
    """The handler on 127.0.0.1 (a free port) in a thread: its OpenAI base URL, until the block ends."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        httpd.shutdown()


def recording_handler(answer: str) -> type:
    """An OpenAI chat server that keeps every request body it is sent (`.bodies`) and answers
    each with `answer` (a real local server, recording what reached it)."""

    class Recording(JsonHandler):
        bodies: list = []
        lock = threading.Lock()

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with self.lock:
                self.bodies.append(body)
            usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
            self.send_json(200, chat_completion(answer, usage, body["model"]))

    return Recording
