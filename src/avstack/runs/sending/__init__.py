"""Sending: the engine (retries, resumable, a run folder, one pool for an ablation's stacks),
the back-ends (runners/), the provider's batch API, the secrets never written, and the causes
of failed requests as they are counted."""
