"""
Any dataclass as a command line: --key=value for every field, typed as declared, --help from each
field's help text, unknown keys and bad values as one ValueError line (for main's handler).

Follows nanochat (argparse instead of nanoGPT's exec configurator). config.py's TrainConfig,
analyzer.py, the experiments and the benchmarks all parse their options here.
"""

import argparse
import re
from dataclasses import field, fields


def opt(default, help, low=None, choices=None):
    """A field with its --help text; low: the smallest value allowed; choices: the only values
    allowed."""
    return field(default=default, metadata={"help": help, "low": low, "choices": choices})


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one ValueError line (for main's handler), not a usage block and
    exit 2."""

    def error(self, message):
        message = re.sub(r"^argument (--\w+): ", r"\1: ", message)
        message = message.replace("unrecognized arguments", "unknown option")
        raise ValueError(f"{message}; see {self.prog} --help")


def to_bool(text):
    if text.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return text.lower() in ("1", "true", "yes", "on")
    raise ValueError(text)


to_bool.__name__ = "bool"  # argparse names the type in its error: "invalid bool value"


def parse(cls, argv, prog, description=""):
    """Every field of the dataclass cls as --key=value (a bool also as --key), typed as it is
    declared -> cls(...)."""
    p = Parser(prog=prog, usage=f"python {prog} [--key=value ...]", description=description,
               allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(cls):
        help = f"{f.metadata.get('help', '')} (default: {f.default!r})".replace("%", "%%")
        if f.type is bool:
            p.add_argument(f"--{f.name}", type=to_bool, default=f.default, help=help,
                           metavar="BOOL", nargs="?", const=True)
        else:
            p.add_argument(f"--{f.name}", type=f.type, default=f.default, help=help,
                           metavar=f.type.__name__.upper(), choices=f.metadata.get("choices"))
    return cls(**vars(p.parse_args(argv)))


def given(argv):
    """The names of the flags on a command line: ["--lr=1", "--resume"] -> {"lr", "resume"}."""
    return {a[2:].partition("=")[0] for a in argv if a.startswith("--")}
