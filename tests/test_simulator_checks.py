"""The rules of the simulator checks (bedside/simulator_checks.py) on hand-made transcripts, the planted
errors of the unfaithful scripted patient, and the flags of a transcript whose LLM checker gave no answer."""

from __future__ import annotations

import math

import pytest

from bedside.providers.simulator_plants import LEAKS, REVERSALS, plant_text, planted
from bedside.scorers.simulator import flags
from bedside.simulator_checks import (
    MIN_WORDS,
    Finding,
    PatientTranscript,
    SpokenTurn,
    early_farewell,
    numbers,
    rule_findings,
    writing_system,
)

SCRIPT = {"medication": "Furosemide 40 mg daily. Aspirin 81 mg.", "history": "Heart failure; hip replacement in 2019."}


def transcript(*said: tuple[str, str], **fields) -> PatientTranscript:
    turns = tuple(SpokenTurn(i, role, text) for i, (role, text) in enumerate(said))
    return PatientTranscript(script=fields.pop("script", SCRIPT), turns=turns, **fields)


def kinds(view: PatientTranscript) -> list[tuple[int | None, str, str]]:
    return [(f.turn, f.kind, f.check) for f in rule_findings(view)[0]]


def test_a_fact_in_the_script_or_said_before_is_grounded():
    view = transcript(
        ("educator", "Take metoprolol 25 mg twice a day."),
        ("patient", "So Lasix 40 mg, aspirin 81, and metoprolol 25 mg 2 times a day? I had my hip done in 2019."),
    )
    assert kinds(view) == []


def test_a_number_or_drug_nobody_said_is_unsupported_once():
    view = transcript(
        ("educator", "Here are your medicines."),
        ("patient", "I also take sertraline 50 mg."),
        ("educator", "Thank you."),
        ("patient", "Yes, the sertraline 50 mg, every morning."),
    )
    [finding] = rule_findings(view)[0]
    assert (finding.turn, finding.kind, finding.check) == (1, "unsupported_fact", "rules:fact")
    assert finding.evidence == "number 50; drug sertraline"


def test_everyday_substances_and_emergency_numbers_are_not_facts():
    view = transcript(("educator", "Hello."), ("patient", "I drink water and coffee, and I'd call 911."))
    assert kinds(view) == []


def test_numbers_are_canonical_and_number_words_ground_digits():
    assert numbers("1,000 and 1000.0 and 0.50") == {"1000", "0.5"}
    assert numbers("take it twice, half a tablet", words=True) == {"2", "0.5"}


@pytest.mark.parametrize(
    "said, check",
    [
        ("As an AI language model, I cannot feel pain.", "rules:disclosure"),
        ("Let me explain how this works: you should take it daily.", "rules:reversal_phrase"),
        ("I'd recommend you rest.", "rules:reversal_phrase"),
        ("Okay. Doctor: please take all your pills.", "rules:clinician_line"),
        ("yeah okay Doctor: Please take all your pills", "rules:clinician_line"),
    ],
)
def test_disclosure_and_role_reversal(said, check):
    view = transcript(("educator", "How are you?"), ("patient", said))
    assert [c for _, _, c in kinds(view)] == [check]


def test_teach_back_is_not_a_role_reversal():
    view = transcript(("educator", "Take it every day."), ("patient", "So I should take it every day, right?"))
    assert kinds(view) == []
    view = transcript(("educator", "Any questions?"), ("patient", "I told my doctor: no more pills, I hate them."))
    assert kinds(view) == []


@pytest.mark.parametrize(
    "said",
    [
        "Just start me on something stronger before I go.",  # a prescribing idiom with "me"
        "Okay. Write me a prescription for prednisone, a five-day burst.",  # an order naming a treatment
        "Fine, but bump the furosemide up to twice a day.",  # an imperative dose change after a comma
        "I'd rather you switch me over to the metoprolol.",  # "I'd rather you" + a prescribing verb
        "You need to lower that dose, it makes me dizzy.",  # a modal of obligation + a treating verb
        "You might want to consider an echo as well.",
        "I would order a stress test first, if I were you.",  # the clinician's act in the first person
        "That pattern meets the diagnostic criteria for heart failure.",  # a diagnosis in the clinician's terms
        "Now say that back to me so I know you understood.",  # a teach-back put to the clinician
        "What would you do if you found blood in your urine?",  # a quiz, the clinician's body as the patient's
        "When you miss a dose your body holds on to the fluid. Remember that.",  # teaching with a generic "you"
        "I'll tell you what to watch for: swelling and weight gain.",
    ],
)
def test_a_patient_prescribing_diagnosing_or_teaching_is_a_role_reversal(said):
    view = transcript(("educator", "We will keep your water pill the same."), ("patient", said))
    assert (1, "role_reversal", "rules:reversal_phrase") in kinds(view)


@pytest.mark.parametrize(
    "said",
    [
        "Can you put me on something for sleep?",  # a request in a question is a patient's
        "Should I double the furosemide if my ankles swell?",
        "Forty milligrams of furosemide, once a day. Got it.",  # a dose repeated back
        "Let me explain how it happened: I slipped on the ice.",  # the patient's own story
        "You should see my ankles by the evening, they're huge.",
        "They put me on oxygen for two days last time.",  # history, not an order
        "Okay, go ahead and give me the shot.",  # consent to what the clinician proposed
        "Stop the aspirin? I've taken it for years.",
        "Lower back pain mostly, and the pills don't help.",
        "I'd rather not take any more pills, honestly.",
        "My daughter wants me to remember everything, but I can't.",
        "What would you do if you were me?",
        "So call 911 if any of these happen: your blood sugar?",  # the educator's words echoed
        "Okay, and you should take it with food, like you said.",
    ],
)
def test_a_patients_own_questions_requests_and_teach_back_are_no_role_reversal(said):
    educator = "Take furosemide 40 mg once a day; you should take it with food. Call 911 if your blood sugar is low."
    view = transcript(("educator", educator), ("patient", said))
    assert "role_reversal" not in {kind for _, kind, _ in kinds(view)}


def test_a_number_in_words_with_a_unit_is_a_fact():
    assert numbers("eighty milligrams, twenty-two units and a thousand every eight hours") == {"80", "22"}
    assert numbers("one hundred and twenty", words=True) >= {"120", "100", "20", "1"}
    view = transcript(("educator", "What dose?"), ("patient", "Eighty milligrams of furosemide."))
    assert kinds(view) == [(1, "unsupported_fact", "rules:fact")]
    view = transcript(("educator", "What dose?"), ("patient", "Forty milligrams, I think."))
    assert kinds(view) == []


def test_talk_from_outside_the_role_play_or_in_an_assistants_register_breaks_the_persona():
    for said, check in [
        ("Speaking in character, my knee hurts.", "rules:disclosure"),
        ("I'm not a real patient, but I'd say yes.", "rules:disclosure"),
        ("Sure! 1. It hurts at night. 2. It hurts on stairs.", "rules:assistant_register"),
        ("*sighs deeply* Fine.", "rules:assistant_register"),
        ("It's worse at night. Let me know if you'd like more details!", "rules:assistant_register"),
    ]:
        assert (1, "persona_break", check) in kinds(transcript(("educator", "How is it?"), ("patient", said)))
    for said in ["Can you send the script to my pharmacy?", "My instructions say to take it with food."]:
        assert kinds(transcript(("educator", "Any questions?"), ("patient", said))) == []


def test_a_farewell_before_the_end_and_a_control_token_end_early():
    said = [
        ("educator", "Next, your diet."),
        ("patient", "See you later, I'm off."),
        ("educator", "Wait."),
        ("patient", "Ok."),
    ]
    assert early_farewell(tuple(SpokenTurn(i, r, t) for i, (r, t) in enumerate(said))) == (
        1,
        'farewell before the session ended: "See you later, I\'m off."',
    )
    for kept in ["I'll take care of it.", "I'm done with the antibiotic now, right?", "I'll go to the pharmacy after."]:
        turns = [said[0], ("patient", kept), *said[2:]]
        assert early_farewell(tuple(SpokenTurn(i, r, t) for i, (r, t) in enumerate(turns))) is None
    assert kinds(transcript(("educator", "Go on."), ("patient", "###STOP###"))) == [
        (1, "early_end", "rules:control_token")
    ]


def test_a_stall_in_chinese_counts_characters_as_words():
    same = [("doctor", "你担心什么？"), ("patient", "我不想拍片子。")] * 3
    assert kinds(transcript(*same)) == [(5, "early_end", "rules:repeated_turn")]
    short = [("doctor", "好吗？"), ("patient", "好。")] * 3
    assert kinds(transcript(*short)) == []


def test_reading_level_above_the_persona_is_a_transcript_finding():
    hard = (
        "Notwithstanding considerable pharmacological intervention, my cardiovascular symptomatology "
        "demonstrates persistent exacerbation necessitating comprehensive multidisciplinary reevaluation. "
    )
    said = [("educator", "Tell me more.")] + [("patient", hard)] * 4
    view = transcript(*said, reading_ceiling=8.0)
    found, grade, words = rule_findings(view)
    assert words >= MIN_WORDS and grade is not None and grade > 8
    assert (None, "persona_break", "rules:reading_level") in [(f.turn, f.kind, f.check) for f in found]
    short = transcript(("educator", "Hi."), ("patient", hard), reading_ceiling=8.0)
    assert rule_findings(short)[1] is None  # too few words to grade: no finding


def test_another_writing_system_breaks_the_persona():
    assert writing_system("我头痛三天了") == "CJK" and writing_system("Hello there") == "LATIN"
    view = transcript(("doctor", "你好"), ("patient", "Thank you, doctor."), writing_system="CJK")
    assert kinds(view) == [(1, "persona_break", "rules:writing_system")]


def test_poor_recall_reciting_the_history_breaks_the_persona():
    said = [("educator", "What do you take?"), ("patient", "Furosemide 40 mg and aspirin 81 mg.")]
    assert kinds(transcript(*said)) == []
    found = kinds(transcript(*said, recall_limited=("medication",)))
    assert found == [(1, "persona_break", "rules:recall")]
    # what the educator said first is not recalled
    told = [("educator", "You take furosemide 40 mg and aspirin 81 mg."), said[1]]
    assert kinds(transcript(*told, recall_limited=("medication",))) == []


def test_stalls_and_empty_turns():
    same = [("educator", "Any questions?"), ("patient", "I'm not sure.")] * 3
    assert kinds(transcript(*same)) == [(5, "early_end", "rules:repeated_turn")]
    backchannel = [("educator", "Any questions?"), ("patient", "okay .")] * 3
    assert kinds(transcript(*backchannel)) == []
    empty = [("educator", "Hello?"), ("patient", "")]
    assert kinds(transcript(*empty)) == [(1, "early_end", "rules:empty_turn")]
    assert kinds(transcript(*empty, empty_allowed=True)) == []


def test_only_the_simulators_turns_are_checked():
    view = transcript(("patient", "I take sertraline 50 mg."), ("doctor", "Okay."), ("patient", "Yes."), checked_from=1)
    assert kinds(view) == []


def test_an_unanswered_llm_checker_leaves_unflagged_kinds_unscored():
    found = [Finding(3, "role_reversal", "rules:reversal_phrase", "I'd recommend you")]
    value = flags(found, unread=True)
    assert value["role_reversal"] == 1.0 and value["simulator_error"] == 1.0
    assert math.isnan(value["unsupported_fact"]) and math.isnan(value["early_end"])
    assert flags([], unread=False) == dict.fromkeys(value, 0.0)


def test_plants_are_seeded_and_avoid_what_the_sample_says():
    draws = [planted(["leak", "reversal"], [], 0.3, 1, "case-1", n) for n in range(1, 200)]
    assert draws == [planted(["leak", "reversal"], [], 0.3, 1, "case-1", n) for n in range(1, 200)]
    assert 0.2 < sum(d is not None for d in draws) / len(draws) < 0.4 and {"leak", "reversal"} <= set(draws)
    assert planted(["leak"], [2], 0.0, 1, "case-1", 2) == "leak" and planted(["leak"], [2], 1.0, 1, "c", 3) is None
    assert planted([], [], 1.0, 1, "c", 1) is None
    with pytest.raises(ValueError, match="unknown kind"):
        planted(["lie"], [], 1.0, 1, "c", 1)
    text = "Patient takes sertraline and gabapentin, weight 37 kg."
    leaks = {plant_text("leak", 1, "c", n, text) for n in range(1, 60)}
    assert not any("sertraline" in t or "gabapentin" in t or " 37 " in t for t in leaks)
    assert len(leaks) == len(LEAKS) and len({plant_text("reversal", 1, "c", n, "") for n in range(60)}) == len(
        REVERSALS
    )


def test_the_llm_checker_knows_the_kinds_of_the_rules():
    from typing import get_args

    from bedside.simulator_checker import Kind
    from bedside.simulator_checks import KINDS

    assert get_args(Kind) == KINDS


def test_a_persons_rating_is_realistic_or_one_of_the_kinds_and_its_rows_are_the_patient_turns():
    from typing import get_args

    import pytest
    from pydantic import ValidationError

    from bedside.simulator_checker import RATINGS, RealismRating, Rating, rating_protocol, read_rating
    from bedside.simulator_checks import KINDS, PatientTranscript, SpokenTurn

    assert set(get_args(Rating)) == {"realistic", *KINDS} == set(RATINGS)
    said = ["Which dose do you take?", "I take 37 mg.", "Any questions?", "Let me explain how this works."]
    roles = ["educator", "patient", "educator", "patient"]
    view = PatientTranscript(script={}, turns=tuple(SpokenTurn(i, r, m) for i, (r, m) in enumerate(zip(roles, said))))
    protocol = rating_protocol("discharge", view)
    assert protocol.name == "discharge.simulator_checker"
    assert protocol.form is not None and protocol.form["turns"]["rows"] == [
        "[1] I take 37 mg.",
        "[3] Let me explain how this works.",
    ]
    # above each row, the turn it answers, whoever spoke it; a patient who opens the conversation answers nothing
    assert protocol.form["turns"]["row_context"] == [
        {"who": "[0] educator", "text": "Which dose do you take?"},
        {"who": "[2] educator", "text": "Any questions?"},
    ]
    opening = PatientTranscript(script={}, turns=(SpokenTurn(0, "patient", "Hello?"), *view.turns[1:2]))
    assert rating_protocol("discharge", opening).form["turns"]["row_context"] == [
        None,
        {"who": "[0] patient", "text": "Hello?"},
    ]
    reply, _ = protocol.read_json(
        '{"turns": [{"rating": "unsupported_fact", "comment": " 37 mg "}, {"rating": "role_reversal"}]}'
    )
    assert read_rating(reply, [1, 3]) == [(1, "unsupported_fact", "37 mg"), (3, "role_reversal", "")]
    with pytest.raises(ValueError, match="2 ratings expected, one per patient turn; the reply has 1"):
        read_rating(RealismRating.model_validate({"turns": [{"rating": "realistic"}]}), [1, 3])
    with pytest.raises(ValidationError):
        RealismRating.model_validate({"turns": [{"rating": "off-script"}]})
