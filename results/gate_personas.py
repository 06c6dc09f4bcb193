"""The release gate under user personas (`passhat gate --user-persona P ... --personas all`):
each criterion is decided once per persona it names, on that persona's trials only, with its
error rate split across them (Bonferroni).

A persona's trials of a task are their own unit ("domain/task@PERSONA",
passhat.personas.outcome_key): a different user is a different experiment, so its trials
are never pooled with another user's. A criterion named for m personas becomes m criteria,
each at alpha / m: by the union bound the chance that any of the m verdicts is wrong is at
most alpha, the gate's stated error for the criterion, whatever the personas' dependence
(they share the agent and the tasks). Each of the m is an ordinary criterion of
passhat.results.gate, so its anytime-valid test, the budget check and the rounds apply
unchanged, at the smaller alpha."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any, Sequence

from passhat.personas import PersonaError, key_user, outcome_key, parse
from passhat.results.gate_units import GateError, Rounds, as_rounds

ALL = "all"


def of_user(rounds: Rounds, persona: str | None) -> list[dict[str, list]]:
    """The rounds' outcomes of one user (a persona's label; None: tau2's own user), keyed
    by their plain task ids."""
    out = []
    for round_ in as_rounds(rounds):
        out.append({task: outcomes for key, outcomes in round_.items()
                    for task, user in [key_user(key)] if user == persona})
    return out


def named(spec: str | None, personas: Sequence[str]) -> list[str]:
    """The personas `--personas` names: ALL, or labels separated by commas, each one of the
    run's (`personas`). Without --personas a gate with personas is refused: which users a
    criterion is about is not the gate's to guess."""
    if not personas:
        if spec:
            raise GateError("--personas names the personas a criterion is checked under: give them with "
                            "--user-persona NAME (docs/personas.md)")
        return []
    if not spec:
        raise GateError("with --user-persona, say which personas the criteria are checked under: --personas all, "
                        f"or some of {', '.join(personas)} separated by commas")
    if spec.strip() == ALL:
        return list(personas)
    given = [p.strip() for p in spec.split(",") if p.strip()]
    chosen = [_label(p, personas) for p in given]
    unknown = [p for p, label in zip(given, chosen) if label not in personas]
    if unknown or not chosen:
        raise GateError(f"--personas {spec}: {', '.join(unknown) or 'no persona'} is not one of this gate's "
                        f"personas ({', '.join(personas)}); give 'all' or some of them separated by commas")
    return list(dict.fromkeys(chosen))


def _label(name: str, personas: Sequence[str]) -> str:
    """A persona as --personas names it: its label, or as --user-persona gave it
    (`impatient` for impatient:1)."""
    if name in personas:
        return name
    try:
        return parse(name).label
    except PersonaError:
        return name


def per_persona(criteria: Sequence, personas: Sequence[str]) -> list:
    """Each criterion once per persona, on that persona's trials, at 1 - alpha / m confidence
    (m = len(personas): Bonferroni). Without personas, the criteria as they are."""
    if not personas:
        return list(criteria)
    m = len(personas)
    return [replace(c, persona=p, split=m, confidence=1 - c.alpha / m) for c in criteria for p in personas]


def criterion_fields(criterion: Any) -> dict[str, Any]:
    """A criterion's fields as the rounds' request records them; without personas, as they
    were before personas existed (a gate recorded then attaches as it did)."""
    fields = asdict(criterion)
    if criterion.persona is None:
        fields.pop("persona")
    if criterion.split == 1:
        fields.pop("split")
    return fields


def unpersonaed(criteria: Sequence) -> list:
    """The criteria with their personas left out, each once: what a never-failing agent
    meets is the same on every persona's copy of the suite, at the split confidence."""
    return list(dict.fromkeys(replace(c, persona=None) for c in criteria))


def outcome_keys(tasks: Sequence[str], personas: Sequence[str]) -> list[str]:
    """Every outcome key of a run's tasks: tau2's own user's, then each persona's."""
    return [outcome_key(t, p) for p in [None, *personas] for t in tasks]


def bonferroni_note(record_criteria: Sequence[dict[str, Any]]) -> str | None:
    """The sentence the summary says of the split, when the gate has personas."""
    split = [c for c in record_criteria if c.get("persona") is not None]
    if not split:
        return None
    m = split[0]["split"]
    alpha = 1 - split[0]["confidence"]
    return (f"Personas: each criterion is decided for each of its {m} persona(s) on that persona's trials alone, "
            f"at alpha / {m} = {alpha:.4g} (Bonferroni), so the chance any of a criterion's {m} verdicts is "
            f"wrong is at most {alpha * m:.4g}.")
