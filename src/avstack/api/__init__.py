"""The one door: every public name of avstack, and every command of the CLI as one library call.

`avstack.prepare(...)`, `avstack.run(...)`, `avstack.ablate(...)` are what `avstack prepare`,
`avstack run` and `avstack ablate` call (inspect_ai's `eval()` is what `inspect eval` calls): the
CLI parses its flags into the records these functions take and prints what they return. Every
name is looked up in one table below and its module imported on first use, so `import avstack`
(and every CLI start) stays light. `avstack.__all__` is this module's `__all__`.

The door's errors are `AvstackError`s (avstack.errors) whose words name the flags, so a library
caller and the command line read the same message; the CLI exits with their `code`.

May import: any part of avstack.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> the module that defines it (relative names are this package's modules)
_NAMES: dict[str, str] = {
    # the records between stages
    "ClipRecord": "avstack.manifest",
    "FrameRef": "avstack.manifest",
    "Prepared": "avstack.manifest",
    "Frame": "avstack.media",
    "Transcript": "avstack.asr.types",
    "Word": "avstack.asr.types",
    "Stack": "avstack.prompting.stacks",
    "PrepareReport": "avstack.preparation.driver",
    "PrepareSettings": "avstack.preparation.settings",
    "StackChoice": "avstack.tasks",
    # the records a command's options become, and what it gives back
    "BackendOptions": "avstack.runs.sending.runners.base",
    "Costing": ".options",
    "Sending": ".options",
    "Ablating": ".options",
    "PrepareJob": "avstack.preparation.settings",
    "ExportOptions": "avstack.runs.exports.rows",
    "Rendering": ".requests",
    "Done": ".options",
    "TranscribeOptions": ".preparing",
    "SynthOptions": ".preparing",
    "Scoring": ".scoring",
    "Reporting": ".scoring",
    "Viewing": ".exports",
    "GroundTruthOptions": ".helpers",
    "EgoGapPrompting": ".helpers",
    "EgoGapExporting": ".helpers",
    # the one error root, and a command that ran and failed
    "AvstackError": "avstack.errors",
    "UsageError": "avstack.errors",
    "CommandFailed": ".failures",
    # prepare: frames, audio, words
    "prepare": ".preparing",
    "open_prepared": ".preparing",
    "sample_frames": ".preparing",
    "sample_root": ".preparing",
    "transcribe": ".preparing",
    "transcribe_files": ".preparing",
    "synth": ".preparing",
    # stacks, requests and the commands over them
    "stack": ".requests",
    "render": ".requests",
    "write_stacks": ".requests",
    "run": ".commands",
    "ablate": ".commands",
    "score": ".scoring",
    "report": ".scoring",
    "export": ".exports",
    "view": ".exports",
    "serve": ".exports",
    # the benchmarks' helpers (each the registered task's own)
    "ecog_ground_truth": ".helpers",
    "egogap_prompts": ".helpers",
    "egogap_export": ".helpers",
    "check_prompts": ".helpers",
    # each option declared once, beside its field (the CLI is built from these)
    "declared": "avstack.options",
    "flag_default": "avstack.options",
    "fold": "avstack.options",
    "keyword_of": "avstack.options",
    "MODEL": "avstack.options",
    "PLAN": "avstack.options",
    "TASK": "avstack.options",
    "DEFAULT_TASK": "avstack.tasks",
    "task_input_records": "avstack.tasks",
    # what the console shows (the CLI's progress and its one-line errors)
    "asr_progress": "avstack.asr.progress",
    "scrub": "avstack.runs.sending.secrets",
    "__version__": "avstack.version",
}

__all__ = [
    "AvstackError",
    "BackendOptions",
    "ClipRecord",
    "CommandFailed",
    "Costing",
    "Frame",
    "FrameRef",
    "PrepareReport",
    "Prepared",
    "Stack",
    "Transcript",
    "Word",
    "ablate",
    "export",
    "open_prepared",
    "prepare",
    "render",
    "report",
    "run",
    "sample_frames",
    "sample_root",
    "score",
    "stack",
    "transcribe",
    "view",
]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _NAMES[name]
    return getattr(import_module(module, __package__) if module.startswith(".") else import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_NAMES])
