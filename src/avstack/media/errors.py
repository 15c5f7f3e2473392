"""The media layer's error (one module, so that every media module can raise it)."""


class MediaError(RuntimeError):
    """A clip that cannot be read; the message names the file."""
