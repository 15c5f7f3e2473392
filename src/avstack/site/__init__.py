"""Static, offline HTML pages (pages): the shared style, script, escaping and a local server; the
tasks build their views on it.

May import: avstack.io.
"""

from avstack.site.pages import serve

__all__ = ["serve"]
