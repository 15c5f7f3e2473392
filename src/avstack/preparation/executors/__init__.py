"""Where a prepare job's clips run: local worker processes that survive a crashing clip (local),
or a Ray cluster (ray). Each calls down into avstack.preparation.stages; neither knows the other.

May import: avstack.io, avstack.lifeline, avstack.manifest, avstack.preparation.stages,
avstack.preparation.settings, avstack.preparation.discover, avstack.asr.
"""
