"""The sound of a rendered video: a span of an audio file re-encoded into the video's container.

In: the audio file (anything FFmpeg decodes that has an audio stream), the encoder the container
takes, the start time in seconds (the first rendered frame's time) and the video's length.
Out: encoded audio packets muxed into an open PyAV container. An unreadable or soundless file is
an ``OptionError`` naming it, raised before anything is rendered.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mmdkit.errors import OptionError, UnavailableError


def _first_audio_stream(container):
    return next((st for st in container.streams if st.type == "audio"), None)


class AudioTrack:
    """``path`` from ``start`` seconds, to be encoded with ``codec`` into a video at ``output``."""

    def __init__(self, output: str, path: str, codec: str, start: float = 0.0):
        import av

        self.path, self.codec, self.start = path, codec, max(float(start), 0.0)
        try:
            with av.open(path) as src:
                stream = _first_audio_stream(src)
                if stream is None:
                    raise OptionError("audio", f"'{path}' has no audio stream")
                self.source_rate = stream.rate or 44100
        except av.error.FFmpegError as e:
            raise OptionError("audio", f"'{path}' is not an audio file FFmpeg can read "
                              f"({getattr(e, 'strerror', None) or e})") from None
        except OSError as e:
            raise OptionError("audio", f"cannot read '{path}': {e.strerror or e}") from None
        self.stream = None

    def add_stream(self, container) -> None:
        """Create the audio stream (before the first packet of the container is written)."""
        try:
            self.stream = container.add_stream(self.codec, rate=self._rate())
        except Exception as e:  # an FFmpeg build without this encoder
            raise UnavailableError(f"this PyAV/FFmpeg has no '{self.codec}' audio encoder ({e})") from None
        self.stream.layout = "stereo"

    def _rate(self) -> int:
        import av

        rates = av.codec.Codec(self.codec, "w").audio_rates
        if not rates or self.source_rate in rates:
            return self.source_rate
        return 48000 if 48000 in rates else max(rates)

    def mux(self, container, seconds: float) -> None:
        """Encode the span [start, start + seconds) and mux it (shorter where the file ends)."""
        import av

        st = self.stream
        rate = st.rate
        fmt = st.format.name
        resampler = av.AudioResampler(format=fmt, layout="stereo", rate=rate)
        first = int(round(self.start * rate))
        end = first + int(round(seconds * rate))
        pos = pts = 0  # samples of the (resampled) file read so far; samples encoded so far
        with av.open(self.path) as src:
            for frame in src.decode(_first_audio_stream(src)):
                for f in resampler.resample(frame):
                    a, b = max(first - pos, 0), min(end - pos, f.samples)
                    pos += f.samples
                    if b > a:
                        pts = self._encode(container, f, a, b, pts)
                if pos >= end:
                    break
        for packet in st.encode(None):
            container.mux(packet)

    def _encode(self, container, frame, a: int, b: int, pts: int) -> int:
        """Encode samples [a, b) of a resampled frame at ``pts``; returns the next pts."""
        import av

        if (a, b) != (0, frame.samples):
            data = frame.to_ndarray()
            planar = frame.format.is_planar
            data = np.ascontiguousarray(data[:, a:b] if planar else data[:, 2 * a:2 * b])
            frame = av.AudioFrame.from_ndarray(data, format=frame.format.name, layout="stereo")
        frame.sample_rate = self.stream.rate
        frame.pts = pts
        frame.time_base = Fraction(1, self.stream.rate)
        for packet in self.stream.encode(frame):
            container.mux(packet)
        return pts + frame.samples
