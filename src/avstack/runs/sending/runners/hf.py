"""Local Hugging Face models, in process: vision-language models (Qwen2-VL / Qwen2.5-VL / Qwen3-VL
style chat templates) from a hub name or folder, and text models from a GGUF file (`hf:PATH.gguf`,
transformers dequantizes it; text stacks only).

Needs the optional `torch` extra (a GGUF file also `gguf` and `accelerate`); the model loads once,
on the GPU when there is one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.prompting.messages import Request, flat_prompt, to_hf
from avstack.runs.sending.runners.base import Answer, Backend, BackendOptions, parts_of, sdk


class MissingTorchvision(ImportError):
    """The installed transformers needs torchvision for this model's processor."""


def _processor(transformers: Any, model: str) -> object:
    if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().is_dir():
        # a path, not a hub name: say so before transformers takes it for a malformed repo id
        raise FileNotFoundError(f"hf:{model}: expected a model folder (or a hub name), found no such folder")
    try:
        return transformers.AutoProcessor.from_pretrained(model)
    except AttributeError as e:
        # transformers 5 builds a vision-language processor with its video processor, which needs
        # torchvision; without it the lookup fails deep inside with an AttributeError
        import importlib.util

        if importlib.util.find_spec("torchvision") is None:
            raise MissingTorchvision(
                f"hf:{model}: transformers {transformers.__version__} loads this model's processor only with "
                "torchvision installed (pip install torchvision, the build that matches your torch)"
            ) from e
        raise


def _dtype_option(transformers: Any, dtype: Any) -> dict[str, object]:
    """`dtype=` since transformers 4.56 (`torch_dtype=` is deprecated there), `torch_dtype=` before."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def turn_end_token(tokenizer: Any) -> int | None:
    """The special token the chat template closes an assistant turn with (`<|im_end|>` for ChatML).

    A GGUF file's tokenizer comes out of transformers with the file's eos, which for ChatML models
    such as SmolLM2 is `<|im_start|>`: generation would run past the answer to max_tokens. The
    template itself says where a turn ends, so that token is read off a rendered turn."""
    probe = "avstack-turn-probe"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": probe}], tokenize=False
        )
    except Exception:  # no chat template, or one that takes no assistant turn
        return None
    after = text[text.index(probe) + len(probe) :] if probe in text else ""
    ids = tokenizer(after, add_special_tokens=False)["input_ids"] if after else []
    if not ids:
        return None
    # a GGUF file's tokenizer marks only eos and unk special; the template's control tokens are
    # added tokens all the same (text never splits into them)
    added = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    return ids[0] if ids[0] in added else None


def _gguf_text_model(transformers: Any, path: Path, dtype: object) -> tuple[Any, Any, list[int]]:
    """A GGUF file's tokenizer and model (dequantized by transformers), and the ids that end an
    answer: the turn end its chat template writes, and the file's eos."""
    if not path.is_file():
        raise FileNotFoundError(f"hf:{path}: expected a GGUF file, found none")
    sdk("hf (a GGUF file)", "gguf", "gguf", "accelerate")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, **_dtype_option(transformers, dtype)
    )
    end = turn_end_token(tokenizer)
    if end is not None and end != tokenizer.eos_token_id:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(end)
    return tokenizer, model, sorted({i for i in (end, tokenizer.eos_token_id) if i is not None})


class HFLocal(Backend):
    name = "hf"
    recorded = ("model", "device", "temperature", "max_tokens")

    def __init__(self, model: str, options: BackendOptions = BackendOptions(), device: str | None = None):
        transformers, torch = sdk("hf", "torch", "transformers", "torch")
        self.model, self.temperature, self.max_tokens = model, options.temperature, options.max_tokens
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        self.text_only = model.lower().endswith(".gguf")
        self.stop_ids: list[int] = []
        if self.text_only:
            self.processor, self.network, self.stop_ids = _gguf_text_model(transformers, Path(model), dtype)
        else:
            self.processor = _processor(transformers, model)
            self.network = transformers.AutoModelForImageTextToText.from_pretrained(
                model, **_dtype_option(transformers, dtype)
            )
        self.network.to(self.device).eval()
        self._torch = torch
        self._lock = threading.Lock()  # one GPU, one generate at a time

    @property
    def hears(self) -> bool:
        """Does the model take sound: its processor has an audio feature extractor (Qwen2.5-Omni's
        and Qwen2-Audio's do; a vision-language processor has none)?"""
        return not self.text_only and getattr(self.processor, "feature_extractor", None) is not None

    def refuses(self, request: Request) -> str | None:
        kinds, stack = parts_of(request), request.meta.get("stack", "this")
        if self.text_only and kinds & {"image", "video", "audio"}:
            return (
                f"hf:{self.model} is a text model (a GGUF file); the {stack} stack sends "
                f"{', '.join(sorted(kinds & {'image', 'video', 'audio'}))}: use a text stack (--variant text)"
            )
        if "video" in kinds:
            return f"the hf back-end takes frames, not a video file; the {stack} stack sends one (full, omni: frames)"
        if "audio" in kinds and not self.hears:
            return (
                f"hf:{self.model} takes no sound (its processor has no audio feature extractor); the {stack} "
                "stack sends the clip's sound: use a model that hears (Qwen2.5-Omni style)"
            )
        return None

    def _messages(self, request: Request) -> Sequence[Mapping[str, object]]:
        if not self.text_only:
            return to_hf(request)
        # a text model's template takes a string per turn (refuses() let only text parts through)
        user, _, _ = flat_prompt(request)
        system = [{"role": "system", "content": request.system}] if request.system else []
        return [*system, {"role": "user", "content": user}]

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        why = self.refuses(request)
        if why:
            raise UsageError(why)
        # the processor reads each audio part's file itself (16 kHz, as prepared)
        extra = {"sampling_rate": 16_000} if "audio" in parts_of(request) else {}
        inputs = self.processor.apply_chat_template(
            self._messages(request),
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            **extra,
        ).to(self.device)
        sample = self.temperature > 0
        stops = {"eos_token_id": self.stop_ids, "pad_token_id": self.stop_ids[0]} if self.stop_ids else {}
        with self._lock, self._torch.inference_mode():
            out = self.network.generate(
                **inputs,
                max_new_tokens=self.max_tokens,
                do_sample=sample,
                temperature=self.temperature or None,
                **stops,
            )
        new = out[0, inputs["input_ids"].shape[1] :]
        text = self.processor.decode(new, skip_special_tokens=True)
        return Answer(text, {"prompt_tokens": int(inputs["input_ids"].shape[1]), "completion_tokens": int(len(new))})
