"""The one error type a user should ever see from zlbench: what is wrong and how to fix it."""


class UsageError(Exception):
    """Bad input (config, corpus, selection, result file). Printed as one clear message, exit 2."""

    exit_code = 2
