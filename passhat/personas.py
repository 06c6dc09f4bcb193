"""User personas: users that are not ideal, an axis of a sweep (`--user-persona`).

A persona is a text of instructions on how the simulated user behaves. It is added to
tau2's user-simulator system prompt in one place only (`with_persona`: a `<persona>`
section after the prompt tau2 builds, which ends with the task's scenario), so the
scenario, the goal and the facts the user knows are the task's, and tau2's grading of the
conversation stays valid. docs/personas.md says what each does.

Built in: the four traits of τ-Trait (He et al., "Impatient Users Confuse AI Agents",
2025; collinear-ai/tau-trait: impatience, confusion, skepticism, incoherence) and a user
who changes their mind once, each at an intensity of 1 to 3 (`impatient:2`; 1 when not
given). The texts are passhat's own. A team's own persona is a text file
(`file:PATH`). The text of each persona a run uses travels with the run and is digested
into its identity like a domain (passhat.run_identity.MEASURED).

This module is pure (it reads a persona's file, nothing else), so every layer may use it:
the CLI parses `--user-persona`, the conversation activity writes the prompt, and the
offline scripted customer (passhat.infra.scripted_customer) recognises a built-in
persona's section to play it in a known way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from passhat.contracts import stable_hash

# Each built-in persona at intensity n is its first n sentences: a stronger intensity
# adds to the manner, never to the task.
BUILTIN: dict[str, tuple[str, ...]] = {
    "impatient": (
        "You are in a hurry and want this solved fast; you keep your messages short.",
        "When the agent asks for more than one thing or explains at length, you say you have no time "
        "for this and press it to get on with it.",
        "If the agent has not started acting on your request after two of its messages, you say you "
        "are fed up, and if it still does not act you end the conversation.",
    ),
    "confused": (
        "You are not sure how things work and sometimes misunderstand what the agent asks.",
        "You mix up similar details at first (which order, which reservation, which date) and only "
        "sort them out when the agent asks you to check.",
        "You ask the agent to repeat or explain its questions, and you answer a question other "
        "than the one asked about once in the conversation.",
    ),
    "skeptical": (
        "You are wary of the agent and of giving out personal details.",
        "You do not give an identifying detail (an id, an email, a date of birth) the first time "
        "it is asked; you ask why it is needed, and give it when asked again.",
        "You question the agent's suggestions and ask it to confirm what it did before you accept.",
    ),
    "incoherent": (
        "You write in short fragments rather than full sentences.",
        "You give one piece of information at a time, sometimes out of order, and leave out "
        "words that would make a sentence whole.",
        "You drift to side remarks that have nothing to do with your request before coming back "
        "to it.",
    ),
    "changes-mind": (
        "Once in the conversation, after stating your request, you change your mind and ask for "
        "something else instead; when the agent responds to that, you say you were wrong and go "
        "back to your original request, which is what you want in the end.",
        "You change your mind before the agent has acted, and hesitate before you confirm.",
        "You apologise for the confusion only after going back to your original request.",
    ),
}
MAX_INTENSITY = 3
FILE_PREFIX = "file:"

# The one place a persona goes: after tau2's user-simulator prompt (which ends with the
# task's scenario), in a section of its own. The first line tells the simulator that the
# persona changes its manner only.
SECTION_OPEN = "<persona>"
SECTION_CLOSE = "</persona>"
SECTION_PREFACE = ("How you behave in this conversation. This changes only your manner: your "
                   "scenario above, your goal and the facts you know stay exactly as given.")
_SECTION = re.compile(re.escape("\n\n" + SECTION_OPEN + "\n" + SECTION_PREFACE + "\n")
                      + r"(.*)" + re.escape("\n" + SECTION_CLOSE) + r"\Z", re.DOTALL)


class PersonaError(ValueError):
    """A --user-persona that names no persona, or a file that cannot be read; the
    message says how to fix it."""


@dataclass(frozen=True)
class Persona:
    label: str  # how reports, trial ids and the run's identity name it: "impatient:2", "file:PATH"
    text: str


def builtin_text(name: str, intensity: int) -> str:
    return " ".join(BUILTIN[name][:intensity])


def parse(spec: str) -> Persona:
    """A --user-persona value as a Persona: NAME or NAME:INTENSITY of a built-in, or
    file:PATH."""
    spec = spec.strip()
    if spec.startswith(FILE_PREFIX):
        path = spec[len(FILE_PREFIX):]
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise PersonaError(f"--user-persona {spec}: cannot read {path}: {reason}") from None
        if not text:
            raise PersonaError(f"--user-persona {spec}: {path} is empty; write the persona's instructions in it")
        return Persona(spec, text)
    name, _, level = spec.partition(":")
    if name not in BUILTIN:
        raise PersonaError(f"unknown --user-persona {spec!r}: use one of {', '.join(BUILTIN)} "
                           f"(optionally NAME:1 to NAME:{MAX_INTENSITY}), or file:PATH for your own")
    if not level:
        intensity = 1
    elif level.isdigit() and 1 <= int(level) <= MAX_INTENSITY:
        intensity = int(level)
    else:
        raise PersonaError(f"--user-persona {spec}: the intensity must be 1 to {MAX_INTENSITY}, e.g. {name}:2")
    return Persona(f"{name}:{intensity}", builtin_text(name, intensity))


def parse_all(specs: list[str]) -> dict[str, str]:
    """The personas of a run, {label: text} in the order given (repeats once)."""
    out: dict[str, str] = {}
    for spec in specs:
        persona = parse(spec)
        out.setdefault(persona.label, persona.text)
    return out


def persona_digests(labels: list[str]) -> dict[str, dict[str, str]]:
    """{label: {"text": digest}} of each persona as it reads now (a file read again): the
    run's identity measures them like its domains. A file that cannot be read any more
    is "unreadable", which a run recorded with it refuses, naming the persona."""
    out = {}
    for label in labels:
        try:
            out[label] = {"text": stable_hash(parse(label).text)[:16]}
        except PersonaError:
            out[label] = {"text": "unreadable"}
    return out


def section(text: str) -> str:
    return f"\n\n{SECTION_OPEN}\n{SECTION_PREFACE}\n{text}\n{SECTION_CLOSE}"


def with_persona(user_prompt: str, text: str | None) -> str:
    """tau2's user-simulator system prompt with a persona's section after it; the prompt
    unchanged without a persona."""
    return user_prompt if text is None else user_prompt + section(text)


def persona_in(system_prompt: str) -> str | None:
    """The persona text of a user-simulator system prompt, None when it has none."""
    match = _SECTION.search(system_prompt)
    return match.group(1) if match else None


def builtin_in(system_prompt: str) -> tuple[str, int] | None:
    """(name, intensity) of the built-in persona a user-simulator prompt carries, None for
    none or a team's own."""
    text = persona_in(system_prompt)
    if text is None:
        return None
    for name, sentences in BUILTIN.items():
        for intensity in range(1, len(sentences) + 1):
            if builtin_text(name, intensity) == text:
                return name, intensity
    return None


# A trial's outcomes under a persona are keyed "domain/task@LABEL" (as its workflow id
# is), tau2's own user's "domain/task" as always: tau2's task ids have no "@".
USER_MARK = "@"


def outcome_key(task_key: str, persona: str | None) -> str:
    """The key of a task's outcomes under a persona (None: tau2's user, the key unchanged)."""
    return task_key if persona is None else f"{task_key}{USER_MARK}{persona}"


def key_user(key: str) -> tuple[str, str | None]:
    """(task key, persona or None) of an outcome key."""
    task, mark, persona = key.partition(USER_MARK)
    return task, (persona if mark else None)
