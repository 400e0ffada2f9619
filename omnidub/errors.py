"""The one exception type for problems a user can fix."""


class OmnidubError(Exception):
    """Bad input or usage. The CLI prints the message as one line and exits with code 2."""
