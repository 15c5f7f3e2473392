"""Packaging: every package is found, none listed by hand (a hand-kept list once shipped a wheel
without avstack.tasks.videoqa). The library lives in src/avstack, the CLI in cli/ (installed as
avstack_cli); metadata, extras and package data are in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages("src"), "avstack_cli"],
    package_dir={"": "src", "avstack_cli": "cli"},
)
