"""The front door's commands as library calls: `avstack.ablate`, `avstack.run`, `avstack.export`
and `avstack.view` do everything their commands do (the plan, the provider's limits, the bill, the
budget, the strict checks), take the command's option names as keywords, and end a command that
fails as an exception (`CommandFailed`, whose `code` the CLI exits with). The CLI parses its
options and makes one of these calls.

May import: any part of avstack.
"""

from avstack.front.commands import ablate, run
from avstack.front.exports import export, view
from avstack.front.options import BackendOptions, CommandFailed, Costing, Done

__all__ = ["BackendOptions", "CommandFailed", "Costing", "Done", "ablate", "export", "run", "view"]
