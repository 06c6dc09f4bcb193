"""passhat.personas: the built-in personas and their intensities, a team's own from a
file, the one place a persona enters the user simulator's prompt, and how a run's
identity measures a persona (its file read again)."""

from __future__ import annotations

import pytest

from passhat.domains.digest import measured_again
from passhat.personas import (
    BUILTIN,
    PersonaError,
    builtin_in,
    parse,
    parse_all,
    persona_digests,
    persona_in,
    with_persona,
)
from passhat.run_identity import fingerprint
from tests.helpers import make_config


def test_a_builtin_persona_grows_with_its_intensity_and_is_named_with_it():
    one, three = parse("impatient"), parse("impatient:3")
    assert one.label == "impatient:1" and three.label == "impatient:3"
    assert three.text.startswith(one.text) and len(three.text) > len(parse("impatient:2").text) > len(one.text)
    assert set(BUILTIN) == {"impatient", "confused", "skeptical", "incoherent", "changes-mind"}
    # The same persona given twice runs once.
    assert list(parse_all(["confused", "confused:1", "skeptical:2"])) == ["confused:1", "skeptical:2"]


@pytest.mark.parametrize("spec, words", [
    ("grumpy", "unknown --user-persona 'grumpy'"),
    ("impatient:0", "the intensity must be 1 to 3"),
    ("impatient:x", "the intensity must be 1 to 3"),
    ("file:/no/such/persona.txt", "cannot read /no/such/persona.txt: No such file or directory"),
])
def test_a_persona_that_is_not_one_is_refused_in_one_line(spec, words):
    with pytest.raises(PersonaError) as err:
        parse(spec)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_team_persona_is_its_file_and_an_empty_file_is_refused(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("  You answer in French.\n")
    assert parse(f"file:{path}").text == "You answer in French."
    path.write_text("\n")
    with pytest.raises(PersonaError, match="is empty"):
        parse(f"file:{path}")


def test_the_persona_goes_after_the_prompt_once_and_is_read_back():
    prompt = "guidelines\n<scenario>\nbook a flight\n</scenario>"
    assert with_persona(prompt, None) == prompt
    text = parse("skeptical:2").text
    written = with_persona(prompt, text)
    assert written.startswith(prompt) and written.count(text) == 1
    assert persona_in(written) == text and persona_in(prompt) is None
    assert builtin_in(written) == ("skeptical", 2)
    assert builtin_in(with_persona(prompt, "my own")) is None


def test_a_persona_is_part_of_the_runs_identity_and_its_file_is_measured_again(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("You are polite.")
    label = f"file:{path}"
    plain = make_config("r1")
    personas = {label: "You are polite."}
    with_one = make_config("r1", user_personas=personas, persona_digests=persona_digests([label]))
    # A run without personas keeps the fingerprint it had before passhat knew them.
    assert fingerprint(plain) == fingerprint(make_config("r1", user_personas={}, persona_digests=None))
    assert fingerprint(with_one) != fingerprint(plain)
    assert measured_again(with_one).persona_digests == with_one.persona_digests
    path.write_text("You are rude.")
    assert measured_again(with_one).persona_digests != with_one.persona_digests
    path.unlink()
    assert measured_again(with_one).persona_digests == {label: {"text": "unreadable"}}


def test_a_sweep_file_lists_personas_and_a_file_is_relative_to_it(tmp_path):
    from passhat.cli import sweep_config
    from passhat.cli.run_config import build_config
    from passhat.cli.run_options import RunOptions

    (tmp_path / "team.txt").write_text("You are terse.")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('domains = ["airline"]\ntasks = { airline = ["0"] }\npersonas = ["impatient:2", "file:team.txt"]\n'
                     '[user]\nmodel = "scripted/customer"\n[[agents]]\nmodel = "scripted/oracle"\n')
    config = build_config(sweep_config.merge(sweep_config.load(str(sweep)), RunOptions(), set()))
    assert config.user_personas == {"impatient:2": parse("impatient:2").text,
                                    f"file:{tmp_path / 'team.txt'}": "You are terse."}
    assert set(config.persona_digests) == set(config.user_personas)
    assert [u.user_persona for u in config.units()] == [None, *config.user_personas]


def test_a_trial_without_a_persona_carries_no_persona_fields():
    """Each activity's input is the trial's spec: without a persona it is as it was
    before personas, so histories are too; with one, the text travels with it."""
    plain = make_config("r1", task_ids={"mock": ["t"]})
    assert "user_persona" not in plain.units()[0].trial(0).model_dump_json()
    text = parse("confused:2").text
    with_one = make_config("r1", task_ids={"mock": ["t"]}, user_personas={"confused:2": text})
    trial = with_one.units()[1].trial(0)
    assert type(trial).model_validate_json(trial.model_dump_json()).user_persona_text == text
