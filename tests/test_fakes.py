"""The fakes kept honest (#52): the routes each local fake server may answer are the ones the real
API documents (fake_http.DOCUMENTED), a success on any other route is refused, and the list
endpoints page as the real ones do. The suite's other tests run against these fakes; this one
lists the routes and checks the guard and the paging themselves."""

import json
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

import fake_http
from fake_http import DOCUMENTED, JsonHandler, documented, page


def test_the_documented_routes_by_api():
    assert documented("openai", "POST", "/v1/chat/completions") == r"/v1/chat/completions"
    assert documented("openai", "GET", "/v1/files?purpose=batch&after=file-3") == r"/v1/files"
    assert documented("openai", "GET", "/v1/files/file-1/content") == r"/v1/files/[^/]+/content"
    assert documented("gemini", "POST", "/v1beta/models/gemini-x:generateContent")
    assert documented("openai", "POST", "/v1/responses/batch") is None
    assert documented("openai", "DELETE", "/v1/batches/b1") is None  # a batch is cancelled, never deleted
    assert documented("llama.cpp", "GET", "/v1/files") is None  # llama-server has no Files API
    listed = {api: [f"{m} {p}" for m, p in routes] for api, routes in DOCUMENTED.items()}
    assert "GET /v1/files" in listed["openai"] and "GET /v1/batches/[^/]+" in listed["openai"]


class Strays(JsonHandler):
    def do_GET(self):
        self.send_json(200, {"ok": True})


def test_a_fake_cannot_answer_a_route_the_real_api_does_not_have():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Strays)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_port}"
    try:
        with urllib.request.urlopen(f"{base}/v1/models") as r:
            assert r.status == 200
        before = len(fake_http.UNDOCUMENTED)
        try:
            urllib.request.urlopen(f"{base}/v1/fine_tunes_of_our_own")
            raise AssertionError("an undocumented route was answered")
        except urllib.error.HTTPError as exc:
            assert exc.code == 599 and "not a route the real openai API documents" in exc.read().decode()
        assert fake_http.UNDOCUMENTED[before:] == [("Strays", "GET", "/v1/fine_tunes_of_our_own")]
    finally:
        httpd.shutdown()
        fake_http.UNDOCUMENTED.clear()


def test_lists_page_as_the_real_api_pages():
    items = [{"id": f"file-{i}"} for i in range(1, 26)]
    first = page(items, "")
    assert len(first["data"]) == 20 and first["has_more"] and first["first_id"] == "file-1"
    rest = page(items, f"after={first['last_id']}")
    assert [x["id"] for x in rest["data"]] == [f"file-{i}" for i in range(21, 26)] and not rest["has_more"]
    assert page(items, "limit=100")["has_more"] is False and json.dumps(page([], ""))
