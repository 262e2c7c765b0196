"""What the picture sinks share (``pipeline.RenderSink``, ``labels.AnnotateSink``): a GL thread, a writer
thread, and two sets of renderer inputs filled in turn.

In: a LoadedTake's characters as the driver poses them. Out (to the subclass): per frame, in one of
two sets of buffers made at ``start``, bone_skin (N,B,4,4), the vertex offsets (N,M,3) and UV offsets
(N,U,4) float32 of the vertices morphs reach (``geometry.morph_rows``) and the first character's
``MaterialValues``. The GL thread owns the context (the renderer is made, used and released on it):
it draws frame n while the driver poses n+1, and the writer thread writes frame n−1. A set of
buffers is reused once its frame is drawn; a failure or Ctrl-C waits for both threads, lets the
writer remove what it half wrote and releases the renderer on its thread.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mmdkit.render.geometry import morph_rows
from mmdkit.render.materials import MaterialValues
from mmdkit.runtime.driver import Sink


class GLSink(Sink):
    """The shared threads and input buffers (see the module docstring). A subclass sets ``writer``
    (with ``abort()``), ``ren`` (made on the GL thread) and calls ``start``, ``fill`` and ``drain``."""

    geometry = True
    writer = ren = None
    _gl = _out = None

    def start(self, model, crowd: int, writer_name: str) -> None:
        """The two threads and the two sets of renderer inputs for ``crowd`` characters of ``model``."""
        self._gl = ThreadPoolExecutor(1, thread_name_prefix="mmdkit-gl")
        self._out = ThreadPoolExecutor(1, thread_name_prefix=writer_name)
        self.rows = morph_rows(model)
        self._inputs = [(np.empty((crowd, model.num_bones, 4, 4), np.float32),
                         np.empty((crowd, len(self.rows[0]), 3), np.float32),
                         np.empty((crowd, len(self.rows[1]), 4), np.float32)) for _ in range(2)]
        self._materials = [None, None]
        self._drawing = [None, None]  # the draw of the frame each set of inputs holds
        self._writing = None

    def fill(self, i: int, characters):
        """Frame i's renderer inputs copied into set i & 1 once its earlier frame is drawn: (bone_skin,
        vertex offsets, UV offsets, MaterialValues); a character a property key hides is collapsed."""
        turn = i & 1
        if self._drawing[turn] is not None:
            self._drawing[turn].result()
        skins, voff, uvoff = self._inputs[turn]
        for k, ch in enumerate(characters):
            skins[k] = ch.bone_skin if ch.visible else 0.0  # hidden by a property key: draws nothing
            np.take(ch.vertex_offset, self.rows[0], axis=0, out=voff[k])
            np.take(ch.uv_offset, self.rows[1], axis=0, out=uvoff[k])
        materials = self._materials[turn] = MaterialValues.of_character(characters[0], out=self._materials[turn])
        return skins, voff, uvoff, materials

    def submit_draw(self, i: int, fn, *args) -> None:
        """Run ``fn(*args)`` on the GL thread as frame i's draw."""
        self._drawing[i & 1] = self._gl.submit(fn, *args)

    def hand_over(self, fn, *args) -> None:
        """On the GL thread, after a frame is drawn: ``fn(*args)`` on the writer thread once the
        previous frame's writing is done."""
        if self._writing is not None:
            self._writing.result()
        self._writing = self._out.submit(fn, *args)

    def drain(self) -> None:
        """Wait for every draw and write in flight (their errors are raised here)."""
        for d in self._drawing:
            if d is not None:
                d.result()
        if self._writing is not None:
            self._writing.result()

    def abort(self) -> None:
        try:
            if self._gl is not None:
                try:
                    self.drain()
                except BaseException:
                    pass
            if self.writer is not None:
                self.writer.abort()
        finally:
            self.release()

    def release(self) -> None:
        """The renderer released on its thread; both threads ended."""
        if self._gl is not None:
            if self.ren is not None:
                self._gl.submit(self.ren.release).result()
                self.ren = None
            self._gl.shutdown(wait=True)
            self._out.shutdown(wait=True)
            self._gl = self._out = None
