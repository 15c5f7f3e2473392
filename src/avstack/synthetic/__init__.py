"""Media with known truth, for tests, benchmarks and the demo: speech with known word times
(synth), files built the way phones and ffmpeg pipelines build them (awkward), the sample set's
makers (sample_data). Never used by the pipeline itself.

May import: avstack.io, avstack.media, avstack.asr.types (the shape of a timed word: the truth it writes).
"""
