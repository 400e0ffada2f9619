import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from omnidub.errors import OmnidubError
from omnidub.script import DEFAULT_SPEAKER, estimate_natural_seconds, read_script


def write(tmp_path, name, text, encoding="utf-8", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return path


SRT = """1
00:00:01,000 --> 00:00:02,500
ALICE: Hello there,
my friend.

2
00:00:03,000 --> 00:00:04,000
[BOB] How are you?

3
00:00:04,500 --> 00:00:06,000
No label here.
"""


def speakers_and_texts(script):
    return [(line.speaker, line.text) for line in script.lines]


@pytest.mark.parametrize(
    "encoding,newline",
    [("utf-8", "\n"), ("utf-8-sig", "\n"), ("utf-8", "\r\n"), ("utf-16", "\r\n"), ("utf-16-be", "\n")],
)
def test_srt_encodings_and_line_endings_give_the_same_lines(tmp_path, encoding, newline):
    text = SRT if encoding != "utf-16-be" else "\ufeff" + SRT  # UTF-16-BE with its byte-order mark
    script = read_script(write(tmp_path, "in.srt", text, encoding, newline), language="en")
    assert speakers_and_texts(script) == [
        ("ALICE", "Hello there, my friend."),
        ("BOB", "How are you?"),
        (DEFAULT_SPEAKER, "No label here."),
    ]
    assert [(line.index, line.start, line.end) for line in script.lines] == [
        (1, 1.0, 2.5),
        (2, 3.0, 4.0),
        (3, 4.5, 6.0),
    ]
    assert all(line.language == "en" for line in script.lines)
    assert script.timed and not script.skipped and not script.warnings


def test_markup_is_stripped_and_whitespace_normalised(tmp_path):
    srt = """1
00:00:01,000 --> 00:00:02,000
{\\an8}<i>Look   <b>out</b>,</i>
<font color="#ffff00">it's   <u>coming</u>!</font>

2
00:00:03,000 --> 00:00:04,000
- Fish &amp; chips?
- Again?
"""
    script = read_script(write(tmp_path, "in.srt", srt))
    assert [line.text for line in script.lines] == ["Look out, it's coming!", "Fish & chips?", "Again?"]


@pytest.mark.parametrize("body", ["- Ready?\n- Yes.", "Ready?\n- Yes.", "<i>- Ready?</i>\n<i>- Yes.</i>"])
def test_a_dialogue_dash_cue_is_two_lines_for_two_speakers(tmp_path, body):
    # Two voices in one cue: one line each, neither taken for the other's speaker, the cue's time shared by length
    # and said; a cue whose only row opens with a dash, or whose second row merely goes on, stays one line.
    srt = f"1\n00:00:10,000 --> 00:00:12,000\n{body}\n\n2\n00:00:13,000 --> 00:00:14,000\n- Well,\nmaybe not.\n"
    script = read_script(write(tmp_path, "in.srt", srt))
    ready, yes, well = script.lines
    assert (ready.text, yes.text, well.text) == ("Ready?", "Yes.", "Well, maybe not.")
    assert ready.speaker == yes.speaker == DEFAULT_SPEAKER and ready.where == yes.where == "cue 1"
    assert ready.start == 10.0 and ready.end == yes.start and yes.end == 12.0 and 10.5 < ready.end < 11.5
    assert any("cue 1: dialogue dashes: 2 speakers' lines, read as 2 lines" in w for w in script.warnings)
    labelled = read_script(write(tmp_path, "l.srt", "1\n00:00:10,000 --> 00:00:12,000\nANN: Ready?\n- Yes.\n"))
    assert [(line.speaker, line.text) for line in labelled.lines] == [("ANN", "Ready?"), (DEFAULT_SPEAKER, "Yes.")]


def test_sound_only_cues_are_skipped_and_reported(tmp_path):
    srt = """1
00:00:01,000 --> 00:00:02,000
[door slams]

2
00:00:02,000 --> 00:00:03,000
♪ la la la ♪

3
00:00:03,000 --> 00:00:04,000
(laughs)

4
00:00:04,000 --> 00:00:05,000
...!

5
00:00:05,000 --> 00:00:06,000
[sigh]

6
00:00:06,000 --> 00:00:07,000
(sighs) I told you [door slams] already.
"""
    script = read_script(write(tmp_path, "in.srt", srt))
    assert speakers_and_texts(script) == [(DEFAULT_SPEAKER, "I told you already.")]
    assert script.lines[0].index == 1
    assert [note.split(":")[0] for note in script.skipped] == ["cue 1", "cue 2", "cue 3", "cue 4", "cue 5"]
    assert "non-verbal" in script.skipped[4]


def test_nonverbal_tags_are_kept_inside_speech(tmp_path):
    srt = """1
00:00:01,000 --> 00:00:03,000
MAYA: That's [laughter] wonderful [Sigh] really [question-en]
"""
    script = read_script(write(tmp_path, "in.srt", srt))
    assert speakers_and_texts(script) == [("MAYA", "That's [laughter] wonderful [sigh] really [question-en]")]


@pytest.mark.parametrize(
    "cue,speaker,text",
    [
        ("[ALICE] Hi.", "ALICE", "Hi."),
        ("[Old Tom] Hi.", "Old Tom", "Hi."),
        ("[door slams] Hi.", DEFAULT_SPEAKER, "Hi."),
        ("[APPLAUSE] Thank you.", DEFAULT_SPEAKER, "Thank you."),
        ("[laughter] Stop it.", DEFAULT_SPEAKER, "[laughter] Stop it."),
        ("Dr. Watson: Indeed.", "Dr. Watson", "Indeed."),
        ("Well, note this: it works.", DEFAULT_SPEAKER, "Well, note this: it works."),
        ("so: what now?", DEFAULT_SPEAKER, "so: what now?"),
        ("The plan is this: we run.", DEFAULT_SPEAKER, "The plan is this: we run."),
        ("Meet me at 10:30 sharp.", DEFAULT_SPEAKER, "Meet me at 10:30 sharp."),
        ("🎬 Ånna: Hello there.", "🎬 Ånna", "Hello there."),
        ("[🎬 Ånna] Hello there.", "🎬 Ånna", "Hello there."),
        ("[Ånna] Hi.", "Ånna", "Hi."),
        ("🎬: Action.", DEFAULT_SPEAKER, "🎬: Action."),
    ],
)
def test_speaker_labels_only_where_a_subtitle_user_means_one(tmp_path, cue, speaker, text):
    script = read_script(write(tmp_path, "in.srt", f"1\n00:00:01,000 --> 00:00:02,000\n{cue}\n"))
    assert speakers_and_texts(script) == [(speaker, text)]


def test_a_cue_with_two_labelled_speakers_is_split_in_time(tmp_path):
    srt = "1\n00:00:10,000 --> 00:00:14,000\n- ANN: Are you coming with us tonight?\n- BEN: No.\n"
    script = read_script(write(tmp_path, "in.srt", srt))
    ann, ben = script.lines
    assert (ann.speaker, ben.speaker) == ("ANN", "BEN")
    assert ann.start == 10.0 and ben.end == 14.0
    assert ann.end == ben.start and ann.end - ann.start > ben.end - ben.start
    assert not script.warnings


def test_a_label_on_its_own_line_names_the_speaker_of_the_next(tmp_path):
    srt = "1\n00:00:01,000 --> 00:00:03,000\nALICE:\nWe should go.\n"
    script = read_script(write(tmp_path, "in.srt", srt))
    assert speakers_and_texts(script) == [("ALICE", "We should go.")]


def test_malformed_srt_timestamp_names_the_cue(tmp_path):
    srt = SRT.replace("00:00:03,000 --> 00:00:04,000", "00:00:03,000 -> 00:00:04,000")
    with pytest.raises(OmnidubError, match=r"in\.srt: cue 2 \(line 6\): malformed"):
        read_script(write(tmp_path, "in.srt", srt))


def test_end_before_start_names_the_cue(tmp_path):
    srt = SRT.replace("00:00:03,000 --> 00:00:04,000", "00:00:05,000 --> 00:00:04,000")
    with pytest.raises(OmnidubError, match=r"in\.srt: cue 2: ends at 00:00:04.000, before it starts at 00:00:05.000"):
        read_script(write(tmp_path, "in.srt", srt))


def test_empty_file_is_an_error(tmp_path):
    with pytest.raises(OmnidubError, match=r"empty\.srt: the file is empty"):
        read_script(write(tmp_path, "empty.srt", "\ufeff\n  \n"))


def test_latin1_bytes_are_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "latin.srt"
    path.write_bytes("1\n00:00:01,000 --> 00:00:02,000\nCafé crème\n".encode("latin-1"))
    with pytest.raises(OmnidubError, match=r"latin\.srt: line 3: not valid UTF-8"):
        read_script(path)


def test_utf16_without_a_byte_order_mark_is_an_error(tmp_path):
    path = tmp_path / "nobom.srt"
    path.write_bytes(SRT.encode("utf-16-le"))
    with pytest.raises(OmnidubError, match=r"nobom\.srt: looks like UTF-16 without a byte-order mark"):
        read_script(path)


def test_nothing_speakable_is_an_error(tmp_path):
    with pytest.raises(OmnidubError, match=r"in\.srt: no speakable lines; skipped: cue 1: sound description only"):
        read_script(write(tmp_path, "in.srt", "1\n00:00:01,000 --> 00:00:02,000\n[thunder]\n"))


def test_unknown_extension_is_an_error(tmp_path):
    with pytest.raises(OmnidubError, match=r"in\.ass: unknown input type '\.ass'"):
        read_script(write(tmp_path, "in.ass", "whatever"))


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(OmnidubError, match=r"nope\.srt: no such file"):
        read_script(tmp_path / "nope.srt")


def test_overlaps_are_reported_and_same_speaker_worded_as_a_problem(tmp_path):
    srt = """1
00:00:01,000 --> 00:00:03,000
ANN: One.

2
00:00:02,000 --> 00:00:04,000
BEN: Two.

3
00:00:03,500 --> 00:00:05,000
BEN: Three.
"""
    script = read_script(write(tmp_path, "in.srt", srt))
    assert len(script.lines) == 3
    different, same = script.warnings
    assert "cue 2 (BEN) overlaps cue 1 (ANN) by 1.00 s" in different
    assert "cue 3 overlaps cue 2 by 0.50 s, both spoken by BEN" in same and "on top of each other" in same


VTT = """WEBVTT - a header text

NOTE this note is not a cue
and spans lines

intro
00:01.000 --> 00:02.500 align:start position:10%
<v Alice Smith>Hi <i>there</i>.</v>

00:00:03.000 --> 00:00:04.000
<v.loud Bob>Hey!
<c.yellow>Over</c> <00:00:03.500>here.

00:00:05.000 --> 00:00:06.000
BOB: Labels work too.
"""


def test_vtt_with_voice_tags_cue_ids_and_notes(tmp_path):
    script = read_script(write(tmp_path, "in.vtt", VTT))
    assert speakers_and_texts(script) == [
        ("Alice Smith", "Hi there."),
        ("Bob", "Hey! Over here."),
        ("Bob", "Labels work too."),  # a label in another case is the same speaker, said once
    ]
    assert any("'Bob'" in note and "'BOB'" in note and "one speaker" in note for note in script.warnings)
    assert [(line.start, line.end) for line in script.lines] == [(1.0, 2.5), (3.0, 4.0), (5.0, 6.0)]


def test_vtt_malformed_timing_names_the_line(tmp_path):
    with pytest.raises(OmnidubError, match=r"in\.vtt: cue at line 3: malformed timestamp"):
        read_script(write(tmp_path, "in.vtt", "WEBVTT\n\n00:01.000 --> 00:0x.000\nHi\n"))
    with pytest.raises(OmnidubError, match=r"bad\.vtt: line 1: a WebVTT file must start with 'WEBVTT'"):
        read_script(write(tmp_path, "bad.vtt", "00:01.000 --> 00:02.000\nHi\n"))


def test_untimed_script_is_laid_out_back_to_back_with_the_gap(tmp_path):
    text = """# a comment
NARRATOR: It was a dark and stormy night.

MAYA: Hello?
# another comment
Nobody answered for a very long time, which was strange.
"""
    script = read_script(write(tmp_path, "play.txt", text), gap=0.5)
    assert not script.timed
    assert speakers_and_texts(script) == [
        ("NARRATOR", "It was a dark and stormy night."),
        ("MAYA", "Hello?"),
        (DEFAULT_SPEAKER, "Nobody answered for a very long time, which was strange."),
    ]
    first, second, third = script.lines
    assert first.start == 0.0
    assert second.start == pytest.approx(first.end + 0.5)
    assert third.start == pytest.approx(second.end + 0.5)
    for line in script.lines:
        assert line.end - line.start == pytest.approx(estimate_natural_seconds(line.text), abs=1e-3)
    # A longer sentence is given more time.
    assert third.end - third.start > first.end - first.start > second.end - second.start


def test_timed_script(tmp_path):
    text = "[00:00:01.000 --> 00:00:02.200] ANN: First.\n[00:00:03,500 --> 00:00:05.000] [BEN] Second.\n"
    script = read_script(write(tmp_path, "play.txt", text))
    assert script.timed
    assert [(line.speaker, line.text, line.start, line.end) for line in script.lines] == [
        ("ANN", "First.", 1.0, 2.2),
        ("BEN", "Second.", 3.5, 5.0),
    ]


def test_script_mixing_timed_and_untimed_lines_is_an_error(tmp_path):
    text = "[00:00:01.000 --> 00:00:02.000] ANN: First.\nBEN: Second.\n"
    with pytest.raises(OmnidubError, match=r"play\.txt: line 2 has no timestamp but line 1 has one"):
        read_script(write(tmp_path, "play.txt", text))


def test_script_malformed_timestamp_names_the_line(tmp_path):
    text = "# header\n[00:00:01.000 --> 00:00:61.000] ANN: First.\n"
    with pytest.raises(OmnidubError, match=r"play\.txt: line 2: timestamp out of range"):
        read_script(write(tmp_path, "play.txt", text))


def test_script_lowercase_labels_are_speakers(tmp_path):
    script = read_script(write(tmp_path, "play.txt", "alice: hi there\n"))
    assert speakers_and_texts(script) == [("alice", "hi there")]


def test_text_outside_any_cue_is_a_warning_naming_its_line_and_never_spoken(tmp_path):
    srt = SRT + "\nTranslator's note: check the names.\n"
    script = read_script(
        write(tmp_path, "in.srt", srt.replace("[BOB] How are you?\n", "[BOB] How are you?\n\nstray words\n"))
    )
    assert [line.text for line in script.lines] == ["Hello there, my friend.", "How are you?", "No label here."]
    assert any(w.startswith("line 10: text outside any cue") and "stray words" in w for w in script.warnings)
    assert any(w.startswith("line 16: text outside any cue") and "Translator" in w for w in script.warnings)
    vtt = read_script(write(tmp_path, "in.vtt", "WEBVTT\n\n00:01.000 --> 00:02.000\nHi.\n\nLeft over words\n"))
    assert [line.text for line in vtt.lines] == ["Hi."]
    assert any(w.startswith("line 6: text outside any cue") for w in vtt.warnings)


@pytest.mark.parametrize(
    "name,text",
    [
        (
            "in.vtt",
            "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Bob>Fine.\n\n00:03.000 --> 00:04.000\n<v ALICE Hello there\n",
        ),
        (
            "in.srt",
            "1\n00:00:01,000 --> 00:00:02,000\nFine.\n\n2\n00:00:03,000 --> 00:00:04,000\n<v ALICE Hello there\n",
        ),
    ],
)
def test_an_unclosed_voice_tag_is_an_error_with_its_line(tmp_path, name, text):
    with pytest.raises(OmnidubError, match=r"line 7: voice tag without its closing '>'"):
        read_script(write(tmp_path, name, text))


@pytest.mark.parametrize(
    "name,text,line",
    [
        ("in.srt", "1\n00:75:00,000 --> 00:75:02,000\nHi.\n", 2),
        ("in.srt", "1\n00:00:01,000 --> 00:00:99,000\nHi.\n", 2),
        ("in.vtt", "WEBVTT\n\n00:99.000 --> 01:00.000\nHi.\n", 3),
        ("in.vtt", "WEBVTT\n\n00:75:00.000 --> 00:75:02.000\nHi.\n", 3),
        ("in.txt", "[00:75:00.000 --> 00:75:02.000] Hi.\n", 1),
    ],
)
def test_out_of_range_fields_are_refused_alike_in_every_format(tmp_path, name, text, line):
    with pytest.raises(OmnidubError, match=rf"line {line}: timestamp out of range"):
        read_script(write(tmp_path, name, text))


def test_terminal_escapes_and_control_characters_never_reach_a_line(tmp_path):
    srt = "1\n00:00:01,000 --> 00:00:02,000\n\x1b[31mALICE\x1b[0m: Red\x07 alert\x1b]0;title\x07 now.\n"
    [line] = read_script(write(tmp_path, "in.srt", srt)).lines
    assert (line.speaker, line.text) == ("ALICE", "Red alert now.")


def test_a_giant_cue_is_refused_and_a_giant_slot_is_noted(tmp_path):
    huge = "1\n00:00:01,000 --> 00:00:03,000\n" + "word " * 100_000 + "\n"
    with pytest.raises(OmnidubError, match=r"cue 1: 499,999 characters of text; a line may hold at most 2,000"):
        read_script(write(tmp_path, "huge.srt", huge))
    script = read_script(write(tmp_path, "long.srt", "1\n00:00:01,000 --> 10:00:01,000\nHi.\n"))
    assert [line.end for line in script.lines] == [36001.0]
    assert any(w.startswith("cue 1 lasts 10:00:00.000") for w in script.warnings)


def test_languages_are_checked_against_omnivoices_list_with_close_matches(tmp_path):
    path = write(tmp_path, "in.srt", SRT)
    assert read_script(path, language="German").lines[0].language == "German"
    with pytest.raises(OmnidubError, match=r"--language: unknown language 'klingon'"):
        read_script(path, language="klingon")
    with pytest.raises(OmnidubError, match=r"unknown language 'en-US'; close matches: en"):
        read_script(path, language="en-US")
    with pytest.raises(OmnidubError, match=r"unknown language 'Englsh'; close matches: english \(en\)"):
        read_script(path, language="Englsh")
    with pytest.raises(OmnidubError, match=r"unknown language 'sp'; close matches: spanish \(es\) \("):
        read_script(path, language="sp")


CAST_SRT = """1
00:00:00,500 --> 00:00:02,000
[JEAN_LUC] Make it so.

2
00:00:02,500 --> 00:00:04,000
[dr who] Run!

3
00:00:04,500 --> 00:00:06,000
[door slams] Who is there?

4
00:00:06,500 --> 00:00:08,000
picard: Engage.
"""


def test_a_bracket_or_colon_label_naming_a_speaker_of_the_cast_is_that_speakers_label(tmp_path):
    path = write(tmp_path, "cast.srt", CAST_SRT)
    # Without the cast, the plain rules read the brackets as sound descriptions and the colon as text.
    plain = read_script(path)
    assert [line.speaker for line in plain.lines] == [DEFAULT_SPEAKER] * 4
    script = read_script(path, speakers=frozenset({"JEAN_LUC", "DR WHO", "Picard"}))
    assert speakers_and_texts(script) == [
        ("JEAN_LUC", "Make it so."),
        ("DR WHO", "Run!"),
        (DEFAULT_SPEAKER, "Who is there?"),
        ("Picard", "Engage."),
    ]
    assert [line.where for line in script.lines] == ["cue 1", "cue 2", "cue 3", "cue 4"]
    # Which rule applied is said once per name, where the plain rules would have read it otherwise.
    said = [w for w in script.warnings if "a name in the cast" in w]
    assert len(said) == 3
    assert said[1].startswith("cue 2: [dr who] is read as the speaker 'DR WHO'") and "sound description" in said[1]
    assert said[2].startswith("cue 4: 'picard:'") and "would be text" in said[2]
    # A label the plain rules take anyway needs no note.
    assert not [
        w for w in read_script(write(tmp_path, "in.srt", SRT), speakers=frozenset({"BOB"})).warnings if "cast" in w
    ]


def test_every_overlapping_pair_is_noted_even_when_two_cues_share_a_number(tmp_path):
    srt = """1
00:00:00,300 --> 00:00:04,240
ALICE: Hello there.

2
00:00:01,000 --> 00:00:02,000
[music]

3
00:00:04,000 --> 00:00:05,000
BOB: Hi.

3
00:00:04,000 --> 00:00:05,500
CAROL: Hey.
"""
    script = read_script(write(tmp_path, "in.srt", srt))
    notes = [w for w in script.warnings if "overlaps" in w]
    assert len(notes) == 3, notes
    assert any(n.startswith("cue 3 (line 15) (CAROL) overlaps cue 3 (BOB) by 1.00 s") for n in notes)
    assert sum("overlaps cue 1 (ALICE) by 0.24 s" in n for n in notes) == 2
