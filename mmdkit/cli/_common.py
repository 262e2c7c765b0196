"""Shared CLI helpers: ``--frames`` (grammar in ``mmdkit.animation.frames``), typed loading, npz output, VPD options.

In: option strings as typed and loaded objects. Out: validated values (frames (F,) float64,
Model/Motion/Pose) or an ``OptionError`` naming the option and what was
typed, which ``mmdkit.cli.main`` prints on one line. Output-path checks live in ``_output.py``.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

FRAMES_DEFAULT = "0:"
"""``--frames`` left out: the whole motion."""
FRAMES_HELP = ("A:B[:STEP] (B inclusive; empty A = 0, empty B = the motion's last key frame), "
               "A+N (N frames from A) or N (the single frame N). Fractional frames sample between keys.")


#: Most warnings of one loaded file shown; the rest are counted.
SHOWN_WARNINGS = 10


def load_as(path: str, cls, what: str, arg: str = "MODEL"):
    """``mmdkit.load(path)``, refused with an OptionError naming ``arg`` unless it is a ``cls``;
    the file's load warnings are printed (at most SHOWN_WARNINGS, then a count)."""
    from mmdkit.formats.io import load_as as _load_as  # not runtime.loading's: no numba for convert

    obj = _load_as(path, cls, what, arg)
    for w in obj.warnings[:SHOWN_WARNINGS]:
        warn(f"{path}: {w}")
    if len(obj.warnings) > SHOWN_WARNINGS:
        warn(f"{path}: {len(obj.warnings) - SHOWN_WARNINGS} more warnings (mmdkit info {path} lists them)")
    return obj


CLIP_HELP = ("A clip the MODEL file carries (glTF animations), by NAME or INDEX, used when MOTION is left out "
             "[default: the first]; frame f is time f/30 s of the clip.")


def _flag(name: str) -> bool:
    """The value of the running subcommand's flag ``name`` ('quiet', 'verbose'); False outside one."""
    import click

    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.params.get(name))


def warn(message: str) -> None:
    """One warning line on stderr, the one format every subcommand uses; none under -q."""
    if not _flag("quiet"):
        print(f"mmdkit: warning: {message}", file=sys.stderr, flush=True)


def report_bound(bound, motion_path: str, *, quiet: bool) -> None:
    """Say on stderr how many bone/morph tracks of a bound motion (``BoundMotion``) bound: a note
    when all did, else one short warning counting those that did not (-v: naming them all)."""
    report = bound.report()
    if not report.complete:
        warn(f"{motion_path}: " + (report.full() if _flag("verbose") else
                                   f"{report.short()} (list: -v or mmdkit info MOTION --model MODEL)"))
    elif not quiet:
        print(f"mmdkit: {motion_path}: {report}", file=sys.stderr)


def save_npz_atomic(path: str, *, compress: bool = False, **arrays) -> None:
    """Write an .npz (zip-deflated with ``compress``) to a temp file beside ``path``, then rename
    it into place."""
    from mmdkit.fileutil import atomic_path

    with atomic_path(path, ".npz.part") as tmp:
        with open(tmp, "wb") as f:
            (np.savez_compressed if compress else np.savez)(f, **arrays)


PHYSICS_HELP = ("Simulate hair and clothes (Bullet rigid bodies) where the model has them; "
                "--no-physics poses from the keys alone.")
QUIET_HELP = "No progress bar, notes or warnings (errors are still printed)."
VERBOSE_HELP = "Warnings in full (e.g. every motion track the model lacks, not only how many)."


def show_progress(quiet: bool) -> bool:
    """Progress bars only on a terminal: a log or pipe gets no runs of carriage returns."""
    return not quiet and sys.stderr.isatty()


@contextlib.contextmanager
def compile_note(quiet: bool):
    """While the block runs, say once on stderr when numba starts compiling (its cache was cold).

    Fires only on cache misses (numba's 'numba:compile' event), so a warm run prints nothing.
    """
    if quiet:
        yield
        return
    from numba.core import event

    class Note(event.Listener):
        said = False

        def on_start(self, ev):
            if not self.said:
                self.said = True
                print("mmdkit: compiling kernels (first run only, 10-60 s)...", file=sys.stderr, flush=True)

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", Note()):
        yield


VPD_OPTION_HELP = ("Load a VPD pose onto the motion at a frame, as MMD's load pose + register: "
                   "FILE.vpd@FRAME[:WEIGHT] (weight 0..1 blends from the motion to the pose; "
                   "repeatable), e.g. --vpd hands.vpd@120:0.5")
