"""Running requests against models, in four rooms by concern:

- `sending/`: the engine (retries, resumable, a run folder), the back-ends (runners/: one
  abstract contract; OpenAI-compatible, Gemini, Anthropic, Hugging Face, replay), the provider's
  batch API, the secrets never written, and the causes of failed requests;
- `planning/`: every request counted and billed before it is sent, the providers' limits and
  prompt-cache rules, the plan as a typed record;
- `ablation/`: the input-stack ablation of any task: its arms, their integrity, their inputs
  against the plan, the A/A noise floor;
- `exports/`: one writer of every task's items for other harnesses. `lmms_hooks` stays at
  `avstack.runs.lmms_hooks`: the lmms-eval task folders already exported import it by that name.

May import: avstack.io, avstack.version, avstack.prompting, avstack.analysis, avstack.preparation.executors.ray
(the one place a Ray cluster is joined: the export's shards go to the workers prepare uses). Never a task: the
engine knows no benchmark.
"""
