"""Packaging: every package is found, none listed by hand (a hand-kept list once shipped a wheel
without avstack.tasks.videoqa). The library lives in src/avstack, the CLI in cli/ (installed as
avstack_cli), the sample set in samples/ (installed as avstack.samples); metadata, extras and
the library's package data are in pyproject.toml."""

from setuptools import find_namespace_packages, setup

# folders of data, not code (the sample set's ecog_en/指令1, ..., the prompt templates'
# prompts/en, ...): listed as the namespace packages they are to setuptools, each ships its files
# as package data without the "Package would be ignored" warnings a newcomer's `make setup`
# printed first (about forty)
SAMPLE_FOLDERS = [f"avstack.samples.{name}" for name in find_namespace_packages("samples")]
LIBRARY = find_namespace_packages("src", include=["avstack", "avstack.*"])

setup(
    # the bundled sample set (samples/ecog_en, 0.4 MB) ships too, as avstack.samples: the
    # README's demo and the docs' examples run on it from a wheel (avstack.sample_root())
    packages=[*LIBRARY, "avstack_cli", "avstack.samples", *SAMPLE_FOLDERS],
    package_dir={"": "src", "avstack_cli": "cli", "avstack.samples": "samples"},
)
