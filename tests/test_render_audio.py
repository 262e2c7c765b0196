"""render.audio: the sound track starts at the first rendered frame; audio mistakes are one-line
option errors."""

import numpy as np
import pytest

from helpers import demo_render


def _tone_after_silence(path, rate=22050):
    """1 s of silence, then 1 s of a loud tone (mono 16-bit WAV)."""
    import math
    import wave

    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(2 * rate) + b"".join(int(12000 * math.sin(i / 5)).to_bytes(2, "little", signed=True)
                                                 for i in range(rate)))


def _audio_rms(path, seconds):
    import av

    with av.open(str(path)) as c:
        st = c.streams.audio[0]
        chunks = [f.to_ndarray().reshape(-1) for f in c.decode(st)]
    data = np.concatenate(chunks)[:int(seconds * st.rate)]  # fltp: the first channel comes first per frame
    return float(np.sqrt(np.mean(data.astype(np.float64) ** 2)))


def test_audio_starts_at_the_first_rendered_frame(tmp_path):
    wav = tmp_path / "tone.wav"
    _tone_after_silence(wav)
    demo_render(tmp_path / "late.mp4", range(30, 45), audio=str(wav))  # 1.0 s .. 1.5 s: the tone
    demo_render(tmp_path / "early.mp4", range(0, 15), audio=str(wav))  # 0 .. 0.5 s: silence
    assert _audio_rms(tmp_path / "late.mp4", 0.3) > 0.1
    assert _audio_rms(tmp_path / "early.mp4", 0.3) < 0.01


def test_audio_mistakes_are_one_line_option_errors(tmp_path):
    from mmdkit.errors import OptionError

    wav = tmp_path / "tone.wav"
    _tone_after_silence(wav)
    text = tmp_path / "notes.wav"
    text.write_text("not a sound")
    for out, audio, what in ((tmp_path / "frames", wav, "sound needs a video"),
                             (tmp_path / "a.mp4", text, "not an audio file"),
                             (tmp_path / "b.gif", wav, "no sound")):
        with pytest.raises(OptionError, match=what) as e:
            demo_render(out, range(2), audio=str(audio))
        assert "\n" not in str(e.value) and str(e.value).startswith("audio: ")
        assert not out.exists()
