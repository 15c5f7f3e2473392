"""avstack's version, in a module of its own that imports nothing: the stages that record it
(a manifest's prepare.json, a run's run.json) read it here, not from the package face, which
would pull the public API (and the tasks) into every worker."""

__version__ = "0.1.0"
