"""Exports for other harnesses, one writer for every task: each item as `avstack run` sends it, in
JSONL, OpenAI batch, Parquet (hf) or an lmms-eval task folder."""
