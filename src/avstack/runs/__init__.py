"""Running requests against models: the engine (retries, resumable, a run folder), the back-ends
(runners/: OpenAI-compatible, Gemini, Hugging Face, replay) and the secrets they never write.

May import: avstack.io, avstack.prompting.messages. Never a task: the engine knows no benchmark.
"""
