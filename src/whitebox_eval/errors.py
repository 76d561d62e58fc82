"""The one exception type for mistakes a user can fix."""


class WhiteboxError(Exception):
    """A problem the user can fix: the message says what to change.

    The CLI prints the message without a traceback and exits with status 2.
    """
