r"""The project's own exception types: the only errors a command answers with one line and no traceback.

``dispatch`` (``dataprep.core.cli``) maps exit statuses from these types alone, so a bug that raises a
builtin error (a ``KeyError`` on a missing dict key, a ``ValueError`` from a library) still shows its
traceback instead of passing for the user's mistake.

Which type to raise:

- ``UsageError`` (exit 2) when the user's input is wrong and the user can fix it: an argument, a config
  value, a file (shard, checkpoint, index, tokenizer, model) that is not what the command needs.
  ``MissingPath`` for a path the user gave that does not exist or is not a file or folder as it should
  be, ``OutputExists`` for an output that may not be replaced without ``--overwrite``. Subclasses name
  the kind: ``ConfigError`` (validation.py), ``CheckpointError``, ``ShardError``, ``DedupIndexError``,
  ``OutputInUse``, ``UnreadableSource``, ``UnknownStage``.
- ``WorkFailed`` (exit 1) when the input was fine but the work could not be done for a reason the message
  states (a JVM that does not start, no readable input, an error budget exceeded).
- A builtin error (``ValueError``, ``KeyError``, ``RuntimeError``, ...) for anything only a bug can reach:
  an invariant of the code, an argument one function passes to another. It shows its traceback.
- Where the user's input reaches a builtin error by itself (``open`` on a path the user gave; pydantic's
  ``ValidationError`` when a user's config is validated), convert it where the input enters (the loader
  or the command) into one of the types above, with the same one-line message.
- A pydantic validator raises ``ValueError`` (pydantic's convention): its loader turns the
  ``ValidationError`` into a ``ConfigError`` (``validation.validated`` for models built from flags).

``UsageError`` is also a ``ValueError``, ``MissingPath`` a ``FileNotFoundError``, ``OutputExists`` a
``FileExistsError`` and ``WorkFailed`` a ``RuntimeError``, so callers that catch those keep working.
The raises still to judge by this rule (those left are bugs' or validators'):
``grep -rnE "raise (ValueError|KeyError|\w*(File|Directory|OS)\w*Error)\(" dataprep pipelines pretrain``
"""

from __future__ import annotations


class CcpretrainError(Exception):
    """Base of the project's own errors; ``exit_status`` is what a command exits with."""

    exit_status = 1


class UsageError(CcpretrainError, ValueError):
    """The user's input (argument, config, path, file) is wrong: one line, exit 2."""

    exit_status = 2


class MissingPath(UsageError, FileNotFoundError):
    """A path the user gave does not exist (or is not the file or folder it should be): one line, exit 2."""


class OutputExists(UsageError, FileExistsError):
    """An output that is there already and may not be replaced without being told (``--overwrite``): exit 2."""


class WorkFailed(CcpretrainError, RuntimeError):
    """The work could not be done for a reason its message states and a user can act on (a JVM that does
    not start, no readable input): the command prints that one line and exits 1, without a traceback."""

    exit_status = 1
