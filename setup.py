"""Packaging: every package is found, none listed by hand (a hand-kept list once shipped a wheel
without avstack.tasks.videoqa). The library lives in src/avstack, the CLI in cli/ (installed as
avstack_cli), the sample set in samples/ (installed as avstack.samples); metadata, extras and
the library's package data are in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    # the bundled sample set (samples/ecog_en, 0.4 MB) ships too, as avstack.samples: the
    # README's demo and the docs' examples run on it from a wheel (avstack.sample_root())
    packages=[*find_packages("src"), "avstack_cli", "avstack.samples"],
    package_dir={"": "src", "avstack_cli": "cli", "avstack.samples": "samples"},
)
