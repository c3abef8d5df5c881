"""Typed errors: what a job can fail with, and the exit code the CLI turns each into.

Code in the package raises these (never ``SystemExit``); :mod:`speechprep.cli`
prints the message as one line and exits with the error's code, so a rule's
log ends with what to fix rather than a traceback.
"""

from __future__ import annotations


class SpeechprepError(Exception):
    """A failure with a message meant for the user; ``exit_code`` for the CLI."""

    exit_code = 1


class UsageError(SpeechprepError):
    """A setting, an argument or an input file that cannot work as given."""

    exit_code = 2


class ModelFileError(UsageError):
    """A model file (checkpoint, .nemo, k-means, vocoder, tokenizer) that cannot be used."""


class EnvironmentMismatch(SpeechprepError):
    """The job runs outside its stage's pinned environment."""

    exit_code = 3


class NothingKept(SpeechprepError):
    """A dataset job whose stage kept nothing of a non-empty input (an empty training set)."""

    exit_code = 4


class WorkerKilled(SpeechprepError):
    """A worker process was killed with SIGKILL (most often for memory): not the
    input's fault, so the job fails and its retry (with more memory) resumes."""


def describe(e: BaseException, limit: int = 400) -> str:
    """An exception as one line: ``Type: message``, whitespace collapsed, at most ``limit`` characters."""
    text = " ".join(f"{type(e).__name__}: {e}".split()).removesuffix(":").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
