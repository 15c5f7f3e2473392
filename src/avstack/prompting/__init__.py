"""From a prepared clip to the request a model receives: the input stack and its ablations
(stacks), the messages (messages), the prompt templates (templates), how times are written
(timefmt), drawn overlays (overlay). An ablation is a value read only here: back-ends never see it.

May import: avstack.io, avstack.manifest, avstack.media, avstack.asr.types (the shape of a timed word).
"""
