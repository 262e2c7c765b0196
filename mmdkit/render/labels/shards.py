"""WebDataset shards of an annotated render: one sample per view and frame, in tar files.

In: the number of shards asked for, the number of samples (frames × views, known at the start) and,
sample by sample in order, a key and its files (name → bytes). Out: ``shards/shard-NNNNNN.tar`` in
the folder given (the annotated render's temporary folder), sample k in shard k·N // total (so
shards are contiguous runs of frames and hold as many samples as they can evenly; at most one
shard per sample); tar members ``KEY.NAME`` with fixed metadata (time 0, owner 0, mode 0644), so
the same samples give the same bytes. A sample's files: rgb.png, depth.png, mask.png, parts.png
(and the optional outputs' pictures) and json (its COCO image, its annotations and its camera: K,
R, t). The ``webdataset`` package reads them: ``webdataset.WebDataset(urls)``.
"""

from __future__ import annotations

import io
import os
import tarfile

MAX_SHARDS = 100_000


class ShardWriter:
    """Writes samples into ``count`` shards under ``folder``/shards (see the module docstring)."""

    def __init__(self, folder: str, count: int, total: int):
        self.folder = os.path.join(folder, "shards")
        os.makedirs(self.folder, exist_ok=True)
        self.count = max(1, min(int(count), int(total)))
        self.total = max(int(total), 1)
        self.sample = 0
        self._tar = None
        self._shard = -1

    def add(self, key: str, files: dict) -> None:
        """The next sample: ``key`` (no dots) and its files {name: bytes}, written in name order."""
        shard = self.sample * self.count // self.total
        if shard != self._shard:
            self._close_tar()
            path = os.path.join(self.folder, f"shard-{shard:06d}.tar")
            self._tar = tarfile.open(path, "w", format=tarfile.USTAR_FORMAT)
            self._shard = shard
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(f"{key}.{name}")
            info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
            self._tar.addfile(info, io.BytesIO(data))
        self._tar.members.clear()  # tarfile keeps every member it wrote; a long run must not
        self.sample += 1

    def _close_tar(self) -> None:
        if self._tar is not None:
            self._tar.close()
            self._tar = None

    def close(self) -> None:
        self._close_tar()

    def abort(self) -> None:
        self._close_tar()
