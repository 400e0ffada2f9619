"""The one exception type for problems a user can fix."""


class OmnidubError(Exception):
    """Bad input or usage. The CLI prints the message as one line and exits with code 2."""


class ArgumentError(OmnidubError):
    """A problem fixed through one argument. The message names it as the library spells it (``asr_model=``);
    :meth:`naming` gives the same message with another spelling, such as the command line's ``--asr-model ``."""

    def __init__(self, argument: str, template: str) -> None:
        # `template` holds "{arg}" wherever the argument is named, followed by the value to give it.
        self.argument, self.template = argument, template
        super().__init__(self.naming(f"{argument}="))

    def naming(self, spelling: str) -> str:
        """The message with the argument spelled `spelling` (e.g. ``"--asr-model "``)."""
        return self.template.replace("{arg}", spelling)

    def __reduce__(self):  # pickled (across processes) from what it was made of, not its message
        return type(self), (self.argument, self.template)


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its first), or its type's name when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
