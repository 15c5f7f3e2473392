"""A tiny Qwen2.5-Omni (the thinker: text, vision and audio) with random weights behind Qwen2's real
tokenizer, converted by llama.cpp's own converter into a text GGUF and one mmproj holding both the
vision and the audio encoder (#70). `make tiny-omni` builds it once per machine; its last line
names the two files, the GGUF first.

No transformers class is needed: the installed transformers (4.51.3, for the tiny Qwen2-VL) has no
Qwen2.5-Omni, so the config.json and the safetensors are written here, with the names and shapes
llama.cpp's converter reads (`conversion/qwenvl.py`: Qwen25OmniModel for the mmproj, Qwen2VLModel
for the text, both under `thinker.`). The audio tower is Whisper's encoder (two convolutions, the
layers, `ln_post`, `proj` into the text width); the vision tower is Qwen2.5-VL's (window attention
with full-attention blocks, an RMS-normed merger).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tiny_qwen2vl import CACHE, CHAT_TEMPLATE, FIRST_SPECIAL, QWEN2_VL_SPECIALS, llama_cpp_source, qwen2_tokenizer

AUDIO_SPECIALS = ("<|audio_bos|>", "<|audio_eos|>", "<|AUDIO|>")  # mtmd's markers around a sound (QWEN2A)
TEXT = {"hidden": 32, "ffn": 64, "layers": 2, "heads": 4, "kv_heads": 2, "positions": 32768}
VISION = {"depth": 4, "hidden": 32, "ffn": 64, "heads": 2}  # full attention in block 3 (window in 0-2)
AUDIO = {"d_model": 32, "layers": 2, "heads": 2, "ffn": 64, "mels": 128}
INIT = 0.3  # as the tiny Qwen2-VL: answers that differ from clip to clip


def config(vocab: int) -> dict:
    t, v, a = TEXT, VISION, AUDIO
    text = {
        "model_type": "qwen2_5_omni_text", "vocab_size": vocab, "hidden_size": t["hidden"],
        "intermediate_size": t["ffn"], "num_hidden_layers": t["layers"], "num_attention_heads": t["heads"],
        "num_key_value_heads": t["kv_heads"], "max_position_embeddings": t["positions"], "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False,
        "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]},
    }  # fmt: skip
    vision = {
        "depth": v["depth"], "hidden_size": v["hidden"], "intermediate_size": v["ffn"], "num_heads": v["heads"],
        "in_channels": 3, "out_hidden_size": t["hidden"], "patch_size": 14, "spatial_merge_size": 2,
        "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [3], "tokens_per_second": 2,
        "hidden_act": "silu",
    }  # fmt: skip
    audio = {
        "d_model": a["d_model"], "encoder_layers": a["layers"], "encoder_attention_heads": a["heads"],
        "encoder_ffn_dim": a["ffn"], "num_mel_bins": a["mels"], "max_source_positions": 1500, "n_window": 100,
        "output_dim": t["hidden"], "activation_function": "gelu",
    }  # fmt: skip
    return {
        "architectures": ["Qwen2_5OmniModel"],
        "model_type": "qwen2_5_omni",
        "enable_audio_output": False,
        "thinker_config": {
            "model_type": "qwen2_5_omni_thinker",
            "text_config": text,
            "vision_config": vision,
            "audio_config": audio,
            "audio_token_index": FIRST_SPECIAL + len(QWEN2_VL_SPECIALS) + 2,
            "image_token_index": 151655,
            "video_token_index": 151656,
        },  # fmt: skip
    }


def tensors(vocab: int, seed: int = 0) -> dict:
    """Every weight under the names the released thinker uses, random (normal, INIT)."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * INIT

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n)

    t, v, a = TEXT, VISION, AUDIO
    h, head = t["hidden"], t["hidden"] // t["heads"]
    out = {"thinker.model.embed_tokens.weight": w(vocab, h), "thinker.model.norm.weight": ones(h),
           "thinker.lm_head.weight": w(vocab, h)}  # fmt: skip
    for i in range(t["layers"]):
        p = f"thinker.model.layers.{i}."
        kv = t["kv_heads"] * head
        out |= {p + "self_attn.q_proj.weight": w(h, h), p + "self_attn.q_proj.bias": w(h),
                p + "self_attn.k_proj.weight": w(kv, h), p + "self_attn.k_proj.bias": w(kv),
                p + "self_attn.v_proj.weight": w(kv, h), p + "self_attn.v_proj.bias": w(kv),
                p + "self_attn.o_proj.weight": w(h, h), p + "mlp.gate_proj.weight": w(t["ffn"], h),
                p + "mlp.up_proj.weight": w(t["ffn"], h), p + "mlp.down_proj.weight": w(h, t["ffn"]),
                p + "input_layernorm.weight": ones(h), p + "post_attention_layernorm.weight": ones(h)}  # fmt: skip
    vh, merged = v["hidden"], v["hidden"] * 4
    out |= {"thinker.visual.patch_embed.proj.weight": w(vh, 3, 2, 14, 14),
            "thinker.visual.merger.ln_q.weight": ones(vh),
            "thinker.visual.merger.mlp.0.weight": w(merged, merged), "thinker.visual.merger.mlp.0.bias": w(merged),
            "thinker.visual.merger.mlp.2.weight": w(h, merged), "thinker.visual.merger.mlp.2.bias": w(h)}  # fmt: skip
    for i in range(v["depth"]):
        p = f"thinker.visual.blocks.{i}."
        out |= {p + "norm1.weight": ones(vh), p + "norm2.weight": ones(vh),
                p + "attn.qkv.weight": w(3 * vh, vh), p + "attn.qkv.bias": w(3 * vh),
                p + "attn.proj.weight": w(vh, vh), p + "attn.proj.bias": w(vh),
                p + "mlp.gate_proj.weight": w(v["ffn"], vh), p + "mlp.gate_proj.bias": w(v["ffn"]),
                p + "mlp.up_proj.weight": w(v["ffn"], vh), p + "mlp.up_proj.bias": w(v["ffn"]),
                p + "mlp.down_proj.weight": w(vh, v["ffn"]), p + "mlp.down_proj.bias": w(vh)}  # fmt: skip
    d = a["d_model"]
    out |= {"thinker.audio_tower.conv1.weight": w(d, a["mels"], 3), "thinker.audio_tower.conv1.bias": w(d),
            "thinker.audio_tower.conv2.weight": w(d, d, 3), "thinker.audio_tower.conv2.bias": w(d),
            "thinker.audio_tower.ln_post.weight": ones(d), "thinker.audio_tower.ln_post.bias": w(d),
            "thinker.audio_tower.proj.weight": w(h, d), "thinker.audio_tower.proj.bias": w(h)}  # fmt: skip
    for i in range(a["layers"]):
        p = f"thinker.audio_tower.layers.{i}."
        out |= {p + "self_attn.q_proj.weight": w(d, d), p + "self_attn.q_proj.bias": w(d),
                p + "self_attn.k_proj.weight": w(d, d),
                p + "self_attn.v_proj.weight": w(d, d), p + "self_attn.v_proj.bias": w(d),
                p + "self_attn.out_proj.weight": w(d, d), p + "self_attn.out_proj.bias": w(d),
                p + "self_attn_layer_norm.weight": ones(d), p + "self_attn_layer_norm.bias": w(d),
                p + "fc1.weight": w(a["ffn"], d), p + "fc1.bias": w(a["ffn"]),
                p + "fc2.weight": w(d, a["ffn"]), p + "fc2.bias": w(d),
                p + "final_layer_norm.weight": ones(d), p + "final_layer_norm.bias": w(d)}  # fmt: skip
    return {k: x.contiguous() for k, x in out.items()}


def build(folder: Path) -> Path:
    """The tiny thinker as a Hugging Face folder: config.json, model.safetensors, the tokenizer,
    the processors' configs the converter reads (image patch size, audio mel bins)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = qwen2_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": [*QWEN2_VL_SPECIALS, *AUDIO_SPECIALS]})
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    vocab = FIRST_SPECIAL + len(QWEN2_VL_SPECIALS) + len(AUDIO_SPECIALS)
    (folder / "config.json").write_text(json.dumps(config(vocab), indent=1))
    pre = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2, "min_pixels": 56 * 56,
           "max_pixels": 112 * 112, "image_mean": [0.48145466, 0.4578275, 0.40821073],
           "image_std": [0.26862954, 0.26130258, 0.27577711], "feature_size": AUDIO["mels"],
           "sampling_rate": 16000, "n_fft": 400, "hop_length": 160, "chunk_length": 300}  # fmt: skip
    (folder / "preprocessor_config.json").write_text(json.dumps(pre, indent=1))
    save_file(tensors(vocab), str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def gguf_folder() -> Path:
    key = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return CACHE / "tiny-qwen25omni-gguf" / key


def cached_gguf() -> tuple[Path, Path] | None:
    """(model.gguf, mmproj.gguf) made by `make tiny-omni` for this recipe, or None."""
    folder = gguf_folder()
    model, mmproj = folder / "model.gguf", folder / "mmproj.gguf"
    return (model, mmproj) if model.is_file() and mmproj.is_file() else None


def build_gguf() -> tuple[Path, Path]:
    """Build and convert (float32), once per recipe: written to a temporary folder, moved into place."""
    done = cached_gguf()
    if done is not None:
        return done
    source, folder = llama_cpp_source(), gguf_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent))
    hf = build(work / "hf")
    convert = [sys.executable, str(source / "convert_hf_to_gguf.py"), str(hf), "--outtype", "f32"]
    for name, extra in (("model.gguf", []), ("mmproj.gguf", ["--mmproj"])):
        done_ = subprocess.run([*convert, "--outfile", str(work / name), *extra], capture_output=True, text=True)
        if done_.returncode != 0:
            raise RuntimeError(f"llama.cpp's converter failed on {name}: {done_.stderr[-3000:]}")
    (work / "made.json").write_text(json.dumps({"converter": str(source), "text": TEXT, "vision": VISION,
                                                "audio": AUDIO}, indent=1))  # fmt: skip
    shutil.rmtree(hf)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)
    return folder / "model.gguf", folder / "mmproj.gguf"


if __name__ == "__main__":  # `make tiny-omni`: the last line names the two files, the GGUF first
    model, mmproj = build_gguf()
    print(model, mmproj)
