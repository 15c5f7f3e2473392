"""Local Hugging Face vision-language models (Qwen2.5-VL / Qwen3-VL style chat templates).

Needs the optional `torch` extra; the model loads once, on the GPU when there is one.
"""

from __future__ import annotations

import threading
from typing import Any

from avstack.prompting.messages import Request, to_hf
from avstack.runs.runners.base import DEFAULTS, Answer, BackendBase, MissingExtra, parts_of


def _modules() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise MissingExtra("hf", "torch", "transformers") from None
    return torch, transformers


class HFLocal(BackendBase):
    name = "hf"

    def __init__(
        self,
        model: str,
        temperature: float = DEFAULTS["temperature"],
        max_tokens: int = DEFAULTS["max_tokens"],
        device: str | None = None,
    ):
        torch, transformers = _modules()
        self.model_id, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        self.processor = transformers.AutoProcessor.from_pretrained(model)
        self.model = transformers.AutoModelForImageTextToText.from_pretrained(model, torch_dtype=dtype).to(self.device)
        self._torch = torch
        self._lock = threading.Lock()  # one GPU, one generate at a time

    def settings(self) -> dict[str, Any]:
        return {"model": self.model_id, "device": self.device, "temperature": self.temperature}

    @property
    def hears(self) -> bool:
        """Does the model take sound: its processor has an audio feature extractor (Qwen2.5-Omni's
        and Qwen2-Audio's do; a vision-language processor has none)?"""
        return getattr(self.processor, "feature_extractor", None) is not None

    def refuses(self, request: Request) -> str | None:
        kinds, stack = parts_of(request), request.meta.get("stack", "this")
        if "video" in kinds:
            return f"the hf back-end takes frames, not a video file; the {stack} stack sends one (full, omni: frames)"
        if "audio" in kinds and not self.hears:
            return (
                f"hf:{self.model_id} takes no sound (its processor has no audio feature extractor); the {stack} "
                "stack sends the clip's sound: use a model that hears (Qwen2.5-Omni style)"
            )
        return None

    def answer(self, request: Request, truth: dict[str, Any] | None = None) -> Answer:
        why = self.refuses(request)
        if why:
            raise ValueError(why)
        messages = to_hf(request)
        # the processor reads each audio part's file itself (16 kHz, as prepared)
        extra = {"sampling_rate": 16_000} if "audio" in parts_of(request) else {}
        inputs = self.processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt", **extra
        ).to(self.device)
        sample = self.temperature > 0
        with self._lock, self._torch.inference_mode():
            out = self.model.generate(
                **inputs, max_new_tokens=self.max_tokens, do_sample=sample, temperature=self.temperature or None
            )
        new = out[0, inputs["input_ids"].shape[1] :]
        text = self.processor.decode(new, skip_special_tokens=True)
        return Answer(text, {"prompt_tokens": int(inputs["input_ids"].shape[1]), "completion_tokens": int(len(new))})
