"""The one error type a user should ever see from zlbench: what is wrong and how to fix it."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import NoReturn, Sequence


class UsageError(Exception):
    """Bad input (config, corpus, selection, result file). Printed as one clear message, exit 2."""

    exit_code = 2


class VerbParser(argparse.ArgumentParser):
    """The verbs' parser (collect, summary, history): a bad argument is one line, as every other
    usage error, naming the option or choice meant where one is close (argparse printed its usage
    block and left the typo to the reader), exit 2."""

    _argv: Sequence[str] = ()

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # --store-ur=x was taken for --store-url, silently
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # An option a verb's parser did not know is reported by the top parser: name the verb's.
        parser = _verb_parser(self, self._argv)
        meant = _misplaced(self, parser, self._argv) or _meant(message, parser)
        if not meant:  # an option argparse did not get to name (`history --ulr X compare`: 'X' is no verb)
            known = {o for p in (self, parser) for o in p._option_string_actions}
            meant = next((m for w in self._argv if w.startswith("--") and w.split("=")[0] not in known
                          and (m := _meant(f"unrecognized arguments: {w}", parser) or _meant(f"unrecognized arguments: {w}", self))), "")
        extra = message.split("unrecognized arguments: ", 1)[1].split() if "unrecognized arguments" in message else []
        if not meant and parser.prog == "zlbench summary" and "--ab" not in self._argv \
                and any(not w.startswith("-") for w in extra):
            meant = "a second run is paired with --ab: zlbench summary A --ab B"  # summary A B
        said = self.prog if "argument VERB" in message else parser.prog  # the parser whose argument it is
        self.exit(2, f"zlbench: error: {said}: {message}. Fix: {meant + '; ' if meant else ''}"
                     f"see `{parser.prog} --help`.\n")


def _misplaced(top: argparse.ArgumentParser, verb: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """A verb's option given before the verb (`history --threshold 3 compare`): where it goes."""
    if verb is top:
        return ""
    name = verb.prog.split()[-1]
    before = list(argv)[:list(argv).index(name)] if name in argv else []
    wrong = next((w.split("=")[0] for w in before if w.startswith("-") and w.split("=")[0] in verb._option_string_actions
                  and w.split("=")[0] not in top._option_string_actions), "")
    return f"{wrong} is an option of {name}: give it after the verb ({verb.prog} ... {wrong} ...)" if wrong else ""


def _verb_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The innermost (sub)parser argv names: `history compare ...` -> history's compare parser."""
    for word in argv:
        verbs = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
        if word in verbs:
            parser = verbs[word]
    return parser


def _meant(message: str, parser: argparse.ArgumentParser) -> str:
    """'--threshold, not --thresold' ('--fail-on slower, not --fail-on slowr') for a close
    misspelling of an option (of a choice)."""
    choice = re.search(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        option = choice[1] + " " if choice[1].startswith("-") else ""  # a verb is named bare
        close = difflib.get_close_matches(choice[2], re.findall(r"'?([^,' ]+)'?", choice[3]), n=1, cutoff=0.6)
        return f"{option}{close[0]}, not {option}{choice[2]}" if close else ""
    words = message.split("unrecognized arguments: ", 1)[1].split() if "unrecognized arguments" in message else []
    wrong = next((w.split("=")[0] for w in words if w.startswith("-")), "")
    same = [o for o in parser._option_string_actions if wrong and o != wrong and o.lstrip("-") == wrong.lstrip("-")]
    if same:  # `--k 1` for `-k 1`
        return f"{same[0]}, not {wrong}"
    known = [o for o in parser._option_string_actions if o.startswith("--")]
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6) if wrong and wrong not in known else []
    return f"{close[0]}, not {wrong}" if close else ""
