"""A backend's options as one table of knobs, resolved once: the keyword, else the environment, else the default.

Why a table: each knob's name, default, environment variable, valid values and the diagnostic for a
bad value live in one row, so a backend's front door (``compile_function``) resolves them all at
once into a frozen record, and no stage below it reads the environment or validates again.  Every
target's record (``cpu.options.CpuOptions``, and a GPU's beside it) is built from such a table.

A bad value is a usage error, E7002, whether it was given as a keyword or in the environment (the
same rule as ``MIND_CACHE`` and ``MIND_FRONTEND_CACHE``): a misspelt setting that silently fell back
to the default would give a user another build than the one asked for.  A keyword of ``None`` means
"not given".
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from mind.diagnostics import error
from mind.spec.record import FrozenRecord

__all__ = ["Knob", "choice", "resolve_knobs", "markdown_table", "E_SETTING"]

E_SETTING = "E7002"


class Knob(FrozenRecord):
    """One option: ``name`` (its keyword), ``default``, ``valid`` (is a keyword value valid),
    ``expects`` (the valid values, for the diagnostic), ``about`` (what it does), and optionally its
    environment variable ``env`` with ``from_env`` (a table from the text of each valid setting to
    its value, or a function of the text raising ``ValueError``), ``shown_default`` (the default
    in words, where its value does not say it) and ``advice`` (the help line for a refused value,
    where it depends on the value or the machine; else "use" ``expects``)."""

    __slots__ = ("name", "default", "valid", "expects", "about", "env", "from_env", "shown_default", "advice")

    name: str
    default: Any
    valid: Callable[[Any], bool]
    expects: str
    about: str
    env: str | None
    from_env: Mapping[str, Any] | Callable[[str], Any] | None
    shown_default: str
    advice: Callable[[Any], str] | None

    def __init__(self, name: str, default: Any, valid: Callable[[Any], bool], expects: str, about: str, *,
                 env: str | None = None, from_env: Mapping[str, Any] | Callable[[str], Any] | None = None,
                 shown_default: str = "", advice: Callable[[Any], str] | None = None) -> None:
        for field, value in (("name", name), ("default", default), ("valid", valid), ("expects", expects),
                             ("about", about), ("env", env), ("from_env", from_env),
                             ("shown_default", shown_default or repr(default)), ("advice", advice)):
            object.__setattr__(self, field, value)

    def value(self, keywords: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
        """This knob's value: the keyword (checked), else the environment (checked), else the default."""
        given = keywords.get(self.name)
        if given is not None:
            if not self.valid(given):
                raise error(E_SETTING, f"invalid value {given!r} for option `{self.name}`",
                            help=self.advice(given) if self.advice else f"use {self.expects}")
            return given
        text = environ.get(self.env, "") if self.env else ""
        if text == "":
            return self.default
        try:
            if isinstance(self.from_env, Mapping):
                return self.from_env[text]
            return self.from_env(text)  # type: ignore[misc]
        except (KeyError, ValueError):
            raise error(E_SETTING, f"environment variable {self.env}={text!r} is not a valid setting",
                        help=f"use {self.env_expects()}, or unset it (default: {self.shown_default})") from None

    def env_expects(self) -> str:
        if isinstance(self.from_env, Mapping):
            return "one of " + ", ".join(self.from_env)
        return self.expects


def choice(name: str, options: Sequence[str], default: Any, about: str, *, env: str | None = None,
           shown_default: str = "") -> Knob:
    """A knob whose value is one of ``options`` (strings), in the keyword and the environment."""
    table = {o: o for o in options}
    return Knob(name, default, lambda v: isinstance(v, str) and v in table,
                "one of " + ", ".join(repr(o) for o in options), about, env=env, from_env=table,
                shown_default=shown_default)


def resolve_knobs(knobs: Sequence[Knob], keywords: Mapping[str, Any], environ: Mapping[str, str],
                  backend: str) -> dict[str, Any]:
    """Every knob's value (``Knob.value``); an unknown keyword is E7002 too."""
    names = [k.name for k in knobs]
    unknown = sorted(set(keywords) - set(names))
    if unknown:
        raise error(E_SETTING, f"unknown {backend} backend option(s): {', '.join(unknown)}",
                    help="options: " + ", ".join(names))
    return {k.name: k.value(keywords, environ) for k in knobs}


def markdown_table(knobs: Sequence[Knob]) -> str:
    """The knobs as the options table of a backend's page in ``docs/`` (a test keeps it in step)."""
    rows = ["| option | environment | default | values | what it does |", "|---|---|---|---|---|"]
    for k in knobs:
        env = f"`{k.env}`" + (f" ({k.env_expects()})" if isinstance(k.from_env, Mapping) else "") if k.env else "–"
        rows.append(f"| `{k.name}` | {env} | {k.shown_default} | {k.expects} | {k.about} |")
    return "\n".join(rows) + "\n"
