"""Frame sinks, chosen by the output path; every one is atomic (nothing half-written is left).

In: (H, W, 3) uint8 RGB frames, the motion frame number of each and the output path.
Out, by the path: a video (.mp4 .mov .mkv: H.264; .webm: VP9; .avi: MPEG-4; .gif) through PyAV,
optionally with an audio track cut to start at the first frame's time; one picture (.png, one
frame); or a folder of ``frame_NNNNNN.png`` named by motion frame number, where the frame files
of an earlier render that this one does not write are removed (other files are left alone).
Errors: ``OptionError`` for a path/audio that cannot work, ``RenderError`` for an unwritable
output, ``UnavailableError`` for a missing encoder.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from fractions import Fraction

import numpy as np

from mmdkit.errors import OptionError, RenderError, UnavailableError
from mmdkit.fileutil import atomic_path

# extension → (container, video codec, pixel format, audio codec or None)
VIDEO_FORMATS = {
    ".mp4": ("mp4", "libx264", "yuv420p", "aac"),
    ".mov": ("mov", "libx264", "yuv420p", "aac"),
    ".mkv": ("matroska", "libx264", "yuv420p", "aac"),
    ".webm": ("webm", "libvpx-vp9", "yuv420p", "libopus"),
    ".avi": ("avi", "mpeg4", "yuv420p", "libmp3lame"),
    ".gif": ("gif", "gif", "rgb8", None),
}
_CODEC_OPTIONS = {"libx264": {"crf": "20", "preset": "veryfast"},
                  "libvpx-vp9": {"crf": "32", "b": "0", "deadline": "realtime", "cpu-used": "8", "row-mt": "1"},
                  "mpeg4": {"qscale": "3"}}
# media types mmdkit cannot write: refused rather than taken for a folder name
_UNSUPPORTED = {".jpg", ".jpeg", ".bmp", ".tga", ".tif", ".tiff", ".webp", ".mpg", ".mpeg", ".flv", ".wmv",
                ".m4v", ".ogv", ".ogg", ".apng", ".exr"}
FRAME_FILE = re.compile(r"frame_\d+(\.\d+)?\.png")  # mmdkit's frame files (old 5-digit names too)
SUPPORTED = "a folder, .png (one frame) or a video: " + " ".join(VIDEO_FORMATS)


def output_kind(output: str) -> str:
    """'video', 'png' (one picture) or 'folder' for an output path (OptionError for a media
    type mmdkit cannot write)."""
    ext = os.path.splitext(output.rstrip("/\\"))[1].lower()
    if os.path.isdir(output) or output.endswith(("/", os.sep)):
        return "folder"
    if ext in VIDEO_FORMATS:
        return "video"
    if ext == ".png":
        return "png"
    if ext in _UNSUPPORTED:
        raise OptionError("output", f"'{output}': cannot write {ext} files; give {SUPPORTED}")
    return "folder"


def frame_file_names(frames) -> list[str]:
    """``frame_000330.png`` per motion frame (``frame_000330.500.png`` when any is fractional)."""
    frames = np.asarray(frames, np.float64)
    if np.all(frames == np.round(frames)):
        return [f"frame_{int(f):06d}.png" for f in frames]
    return [f"frame_{f:010.3f}.png" for f in frames]


def _unwritable(output: str, e: OSError) -> RenderError:
    return RenderError(f"cannot write '{output}': {e.strerror or e}")


def _parent_folder(output: str) -> str:
    """The folder ``output`` goes in; it must exist (mmdkit never creates the folders an output
    path names, only the PNG-frames folder itself)."""
    parent = os.path.dirname(os.path.abspath(output.rstrip("/\\")))
    if not os.path.isdir(parent):
        raise RenderError(f"cannot write '{output}': folder {parent} does not exist")
    return parent


class _AtomicFile:
    """A temporary file beside ``output`` that replaces it on ``commit`` (errors name ``output``)."""

    def __init__(self, output: str, suffix: str):
        self.output = output
        _parent_folder(output)
        if os.path.isdir(output):
            raise RenderError(f"cannot write '{output}': it is a folder")
        self._ctx = atomic_path(output, suffix)
        try:
            self.tmp = self._ctx.__enter__()
        except OSError as e:
            raise _unwritable(output, e) from None

    def commit(self) -> None:
        try:
            self._ctx.__exit__(None, None, None)
        except OSError as e:
            raise _unwritable(self.output, e) from None

    def discard(self) -> None:
        try:
            self._ctx.__exit__(RenderError, RenderError("aborted"), None)
        except RenderError:
            pass


class VideoWriter:
    """A video file through PyAV (format from the extension, see VIDEO_FORMATS), with an optional
    audio track: ``audio`` from ``audio_start`` seconds on, as long as the video."""

    def __init__(self, path: str, size, fps: float = 30.0, *, audio: str | None = None, audio_start: float = 0.0):
        import av

        from mmdkit.render.audio import AudioTrack

        self.path = path
        container, codec, pix_fmt, audio_codec = VIDEO_FORMATS[os.path.splitext(path)[1].lower()]
        self.audio = AudioTrack(path, audio, audio_codec, audio_start) if audio else None
        self._file = _AtomicFile(path, ".part")
        try:
            self.container = av.open(self._file.tmp, mode="w", format=container)
            self.stream = self._video_stream(codec, pix_fmt, size, fps)
            if self.audio is not None:  # streams must exist before the first packet is written
                self.audio.add_stream(self.container)
        except BaseException:
            self._file.discard()
            raise
        self.frames = 0
        self.fps = float(fps)
        self._even = None  # (h, w, 3) uint8: frames cut to the even size 4:2:0 needs

    def _video_stream(self, codec: str, pix_fmt: str, size, fps: float):
        try:
            stream = self.container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        except Exception as e:  # an FFmpeg build without this encoder
            raise UnavailableError(f"this PyAV/FFmpeg has no '{codec}' encoder for {self.path} ({e}); "
                                   "write .mp4 or PNG frames instead") from None
        w, h = size
        even = pix_fmt == "yuv420p"  # 4:2:0 chroma needs even sizes
        stream.width, stream.height = (w - w % 2, h - h % 2) if even else (w, h)
        stream.pix_fmt = pix_fmt
        stream.options = dict(_CODEC_OPTIONS.get(codec, {}))
        return stream

    def write(self, img: np.ndarray) -> None:
        import av

        h, w = self.stream.height, self.stream.width
        part = img[:h, :w]
        if not part.flags.c_contiguous:  # cut to an even size: through one buffer, made on the first frame
            if self._even is None:
                self._even = np.empty((h, w, 3), np.uint8)
            part = self._even
            np.copyto(part, img[:h, :w])
        frame = av.VideoFrame.from_ndarray(part, format="rgb24")
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        if self.audio is not None:
            self.audio.mux(self.container, self.frames / self.fps)
        self.container.close()
        self._file.commit()

    def abort(self) -> None:
        try:
            self.container.close()
        except Exception:  # a half-written container: it is being thrown away anyway
            pass
        self._file.discard()


class PngWriter:
    """One picture: the single frame of a render into a .png path."""

    def __init__(self, path: str):
        self.path = path
        self._file = _AtomicFile(path, ".png.part")
        self.frames = 0

    def write(self, img: np.ndarray) -> None:
        from PIL import Image

        Image.fromarray(img).save(self._file.tmp, format="PNG")
        self.frames += 1

    def close(self) -> None:
        self._file.commit()

    def abort(self) -> None:
        self._file.discard()


class FolderWriter:
    """PNG frames named by motion frame number, written into a temporary folder beside the target
    and moved in on ``close``; mmdkit frame files of an earlier render that this one did not write
    are then removed from the target (any other file stays)."""

    def __init__(self, folder: str, frames=None):
        self.folder = os.path.abspath(folder)
        self.output = folder
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise RenderError(f"cannot write frames into '{folder}': it is a file")
        try:
            self.tmp = tempfile.mkdtemp(prefix=".frames-", dir=_parent_folder(self.folder))
        except OSError as e:
            raise _unwritable(folder, e) from None
        self.names = None if frames is None else frame_file_names(frames)
        self.frames = 0

    def write(self, img: np.ndarray) -> None:
        from PIL import Image

        name = self.names[self.frames] if self.names is not None else f"frame_{self.frames:06d}.png"
        Image.fromarray(img).save(os.path.join(self.tmp, name))
        self.frames += 1

    def close(self) -> None:
        try:
            os.makedirs(self.folder, exist_ok=True)
            new = set(os.listdir(self.tmp))
            for name in sorted(new):
                os.replace(os.path.join(self.tmp, name), os.path.join(self.folder, name))
            for name in os.listdir(self.folder):
                if name not in new and FRAME_FILE.fullmatch(name):
                    os.unlink(os.path.join(self.folder, name))
        except OSError as e:
            raise _unwritable(self.output, e) from None
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def open_writer(output: str, size, fps: float, audio: str | None = None, *, frames=None,
                audio_start: float = 0.0):
    """The sink for ``output`` (see the module doc). ``frames``: the motion frame number of each
    frame that will be written (names PNG frames; a .png path takes exactly one); ``audio``: a
    file whose sound from ``audio_start`` seconds on goes into a video."""
    kind = output_kind(output)
    count = None if frames is None else len(frames)
    if audio and kind != "video":
        raise OptionError("audio", f"'{output}' is {'a picture' if kind == 'png' else 'a folder of pictures'}: "
                          f"sound needs a video output ({' '.join(e for e, f in VIDEO_FORMATS.items() if f[3])})")
    if kind == "video":
        if audio and VIDEO_FORMATS[os.path.splitext(output)[1].lower()][3] is None:
            raise OptionError("audio", f"'{output}': a .gif has no sound; use .mp4, .mkv, .webm, .avi or .mov")
        return VideoWriter(output, size, fps, audio=audio, audio_start=audio_start)
    if kind == "png":
        if count != 1:
            raise OptionError("output", f"'{output}' is one picture but {count or 'several'} frames were asked "
                              f"for; give a folder or a video ({' '.join(VIDEO_FORMATS)})")
        return PngWriter(output)
    return FolderWriter(output, frames)
