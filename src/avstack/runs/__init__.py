"""Running requests against models: the engine (retries, resumable, a run folder), the back-ends
(runners/: OpenAI-compatible, Gemini, Hugging Face, replay), the secrets they never write, and the
input-stack ablation of any task (ablation: its stacks, rounds, cue values and report).

May import: avstack.io, avstack.version, avstack.prompting, avstack.analysis. Never a task: the engine knows
no benchmark.
"""
