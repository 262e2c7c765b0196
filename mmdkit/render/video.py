"""Frame sinks: H.264 MP4 through PyAV, or numbered PNG files; both atomic.

In: (H, W, 3) uint8 RGB frames. Out: an .mp4 written to a temporary file in the target folder
and renamed when complete (optionally with an audio track muxed in), or PNGs written into a
temporary folder that replaces the target's files when complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from mmdkit.fileutil import atomic_path


class Mp4Writer:
    def __init__(self, path: str, size, fps: float = 30.0, *, crf: int = 20, audio: str | None = None):
        import av

        self.path = os.path.abspath(path)
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        self._atomic = atomic_path(self.path, ".mp4.part")
        self.tmp = self._atomic.__enter__()
        self.container = av.open(self.tmp, mode="w", format="mp4")
        w, h = size
        self.stream = self.container.add_stream("libx264", rate=int(round(fps)))
        self.stream.width, self.stream.height = w - w % 2, h - h % 2
        self.stream.pix_fmt = "yuv420p"
        self.stream.options = {"crf": str(crf), "preset": "veryfast"}
        self.audio = audio
        self._audio_out = None
        if audio:  # streams must exist before the first packet is written
            with av.open(audio) as src:
                ain = next((st for st in src.streams if st.type == "audio"), None)
                if ain is None:
                    raise ValueError(f"{audio}: no audio stream")
                self._audio_rate = ain.rate or 44100
            self._audio_out = self.container.add_stream("aac", rate=self._audio_rate)
        self.frames = 0
        self.fps = fps

    def write(self, img: np.ndarray) -> None:
        import av

        h, w = self.stream.height, self.stream.width
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(img[:h, :w]), format="rgb24")
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.frames += 1

    def _mux_audio(self) -> None:
        from fractions import Fraction

        import av

        seconds = self.frames / self.fps
        rate = self._audio_rate
        resampler = av.AudioResampler(format="fltp", layout="stereo", rate=rate)
        pts = 0
        with av.open(self.audio) as src:
            ain = next(st for st in src.streams if st.type == "audio")
            for frame in src.decode(ain):
                if pts / rate > seconds:
                    break
                for f in resampler.resample(frame):
                    f.pts = pts
                    f.time_base = Fraction(1, rate)
                    pts += f.samples
                    for packet in self._audio_out.encode(f):
                        self.container.mux(packet)
        for packet in self._audio_out.encode(None):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        if self.audio:
            self._mux_audio()
        self.container.close()
        self._atomic.__exit__(None, None, None)

    def abort(self) -> None:
        try:
            self.container.close()
        except Exception:
            pass
        try:
            self._atomic.__exit__(RuntimeError, RuntimeError("aborted"), None)
        except RuntimeError:
            pass


class PngWriter:
    def __init__(self, folder: str):
        self.folder = os.path.abspath(folder)
        parent = os.path.dirname(self.folder.rstrip(os.sep)) or "."
        os.makedirs(parent, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=".frames-", dir=parent)
        self.frames = 0

    def write(self, img: np.ndarray) -> None:
        from PIL import Image

        Image.fromarray(img).save(os.path.join(self.tmp, f"frame_{self.frames:05d}.png"))
        self.frames += 1

    def close(self) -> None:
        os.makedirs(self.folder, exist_ok=True)
        for name in sorted(os.listdir(self.tmp)):
            os.replace(os.path.join(self.tmp, name), os.path.join(self.folder, name))
        shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def open_writer(output: str, size, fps: float, audio: str | None = None):
    """MP4 for a path ending in .mp4, else a folder of PNG frames."""
    if output.lower().endswith(".mp4"):
        return Mp4Writer(output, size, fps, audio=audio)
    if audio:
        raise ValueError("--audio needs an .mp4 output")
    return PngWriter(output)
