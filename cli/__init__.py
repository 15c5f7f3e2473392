"""The `avstack` command line (installed as avstack_cli): see app."""
