"""One error type for the package; every message says what to do about it.

The CLI (``python -m taillab``) prints ``TaillabError`` messages as one line and exits 2;
anything else escaping is a bug in this package, not in the user's input.
"""


class TaillabError(Exception):
    """Base class: a results folder or an argument the package cannot use."""


class SchemaError(TaillabError):
    """A JSON file is missing its schema tag, has an unknown one, or lacks a required key."""


class ResultsNotFound(TaillabError):
    """The path given is not a results folder written by taillab."""


class HlogError(TaillabError):
    """An HdrHistogram interval log could not be parsed."""
