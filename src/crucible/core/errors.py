"""Exceptions that carry a user-facing message naming the file, row and field at fault."""


class CrucibleError(Exception):
    """Base class: the CLI prints the message without a traceback and exits with status 2."""


class ConfigError(CrucibleError):
    """A config key, task or model name that crucible does not know."""


class HashMismatchError(CrucibleError):
    """A downloaded or extracted artifact whose SHA-256 differs from the pinned one."""


class DataValidationError(CrucibleError):
    """Data that disagrees with its official metadata or with the stage's contract."""


class PredictionFileError(DataValidationError):
    """A predictions file that is malformed: missing/extra/duplicate ids, NaN, bad dtype."""
