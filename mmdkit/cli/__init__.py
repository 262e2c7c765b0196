"""The ``mmdkit`` command: a click group whose subcommands live one per module here.

In: argv. Out: exit status; ``main`` is the one place errors become messages: every
``MmdkitError`` (and OSError) is printed on one line, ``mmdkit: error: …``, exit 2 (no traceback).
Each subcommand module ``mmdkit/cli/<name>.py`` exposes a click command called ``command``;
it is imported only when used, so ``mmdkit info`` never loads OpenGL or Bullet.
"""

from __future__ import annotations

import gc
import importlib
import signal
import sys
import threading

import click

from mmdkit.errors import MmdkitError, OptionError
from mmdkit.threads import import_numba_without_blas_probe

#: The garbage collector's generation-0 threshold while a command runs (Python's default: 700).
#: Start-up (numpy, numba's first use, the loaded files) makes ~180k objects that live as long as
#: the process; at 700 the collector walks them ~250 times, 0.1-0.3 s of ``mmdkit export``
#: (measured with gc.callbacks); the per-frame loops allocate few containers either way. Run as
#: the command (``argv`` None), ``main`` also freezes the heap when the command is done: the
#: interpreter's last full collection would walk it once more for nothing (~0.1 s).
GC_THRESHOLD = 200_000

#: subcommands that run numba kernels (``main`` imports numba for them without its BLAS probe;
#: ``view`` does it itself, once its page is served)
NUMBA_COMMANDS = frozenset({"pose", "bench", "render", "export", "batch", "retarget"})

# name -> (module, one-line help shown by `mmdkit --help`)
SUBCOMMANDS = {
    "info": ("mmdkit.cli.info", "Summarise a model or motion file: PMX/PMD/VMD/VPD, glTF/GLB, FBX/.x/COLLADA/BVH… (counts, names, warnings)."),
    "convert": ("mmdkit.cli.convert", "Convert between formats by extension (PMD→PMX, glTF/FBX/.x→PMX, a clip→VMD; says what was dropped)."),
    "pose": ("mmdkit.cli.pose", "Pose a model with a motion over frames and write arrays (.npz)."),
    "bench": ("mmdkit.cli.bench", "Time each per-frame stage (sample, morph, bones, physics, skin)."),
    "render": ("mmdkit.cli.render", "Render a model dancing to a motion into a video, a PNG or PNG frames."),
    "export": ("mmdkit.cli.export", "Bake a motion (IK, physics) into glTF/GLB, BVH, a baked VMD or dataset arrays."),
    "view": ("mmdkit.cli.view", "Play a model and motion in the browser: timeline, physics, camera, bones, rigid bodies."),
    "retarget": ("mmdkit.cli.retarget", "Retarget a dance onto another humanoid (MMD, VRM, glTF, BVH): keys, leg IK, planted feet."),
    "batch": ("mmdkit.cli.batch", "Run many model × motion jobs (manifest or globs) to npz/glb/bvh/vmd/mp4, resumable."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return [n for n, (mod, _) in SUBCOMMANDS.items() if importlib.util.find_spec(mod) is not None]

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS:
            return None
        mod, _ = SUBCOMMANDS[name]
        try:
            return importlib.import_module(mod).command
        except ModuleNotFoundError as e:
            if e.name == mod:
                return None
            raise

    def format_commands(self, ctx, formatter):
        rows = [(n, SUBCOMMANDS[n][1]) for n in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mmdkit")
def cli():
    """mmdkit — MikuMikuDance models and motions, headless: read, pose, simulate, skin, render.

    \b
    Examples:
      mmdkit info model.pmx               what is in a file
      mmdkit convert model.pmd model.pmx  PMD → PMX
      mmdkit pose model.pmx dance.vmd --frames 0:300 -o pose.npz
      mmdkit render --demo -o demo.mp4    built-in demo, nothing downloaded

    \b
    --frames is the same everywhere: A:B[:STEP] (B inclusive), A+N (N frames from A) or N (one
    frame; in bench, N frames). Physics is on where a model has rigid bodies (--no-physics).
    """


class _Terminated(SystemExit):
    """SIGTERM as an exception: it unwinds through every ``with``/``finally`` (atomic writers
    remove their temp files) and is not swallowed by ``except Exception``."""


_RETRY_SECONDS = 0.01


def _on_sigterm(signum, frame):
    """Raise ``_Terminated``, except inside a finalizer: Python prints and drops an exception a
    ``__del__`` raises (a GL object collected mid-render), so the stop would be lost; there it
    tries again ``_RETRY_SECONDS`` later (SIGALRM), once the finalizer has returned."""
    if _in_finalizer(frame):
        signal.signal(signal.SIGALRM, _on_sigterm)
        signal.setitimer(signal.ITIMER_REAL, _RETRY_SECONDS)
        return
    raise _Terminated(128 + signal.SIGTERM)


def _in_finalizer(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _flag_names(argv) -> dict:
    """{parameter name: flag} of the subcommand in ``argv`` ('palette_size' → '--palette')."""
    name = next((a for a in argv if a in SUBCOMMANDS), None)
    command = cli.get_command(None, name) if name else None
    if command is None:
        return {}
    return {p.name: max(p.opts, key=len) for p in command.params if isinstance(p, click.Option)}


def _one_line(e: BaseException, argv) -> str:
    """The message of ``e`` on one line; an OptionError raised below the CLI under a parameter name
    ('msaa') is shown under the flag the user typed ('--msaa')."""
    text = str(e)
    if isinstance(e, OSError) and e.filename and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    if isinstance(e, OptionError) and e.option and not e.option.startswith("-"):
        flag = _flag_names(argv).get(e.option)
        text = f"{flag}: {e.detail}" if flag else text
    return " ".join(text.split("\n"))


def main(argv=None):
    """Console entry point: runs the group; the one place errors become messages and exit codes.

    MmdkitError and OSError → ``mmdkit: error: <one line>`` (exit 2); click usage errors → click's
    usage message (exit 2); Ctrl-C → exit 130; SIGTERM → exit 143 after outputs are cleaned up.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main_thread else None
    gc_threshold = gc.get_threshold()
    gc.set_threshold(max(GC_THRESHOLD, gc_threshold[0]), *gc_threshold[1:])
    if NUMBA_COMMANDS.intersection(sys.argv[1:] if argv is None else argv):
        import_numba_without_blas_probe()
    try:
        code = cli.main(args=argv, prog_name="mmdkit", standalone_mode=False)
    except _Terminated as e:
        click.echo("mmdkit: terminated", err=True)
        code = e.code
    except click.exceptions.Abort:
        click.echo("mmdkit: aborted", err=True)
        code = 130
    except click.ClickException as e:
        e.show()
        code = e.exit_code
    except (MmdkitError, OSError) as e:
        click.echo(f"mmdkit: error: {_one_line(e, sys.argv[1:] if argv is None else argv)}", err=True)
        code = 2
    except MemoryError:
        click.echo("mmdkit: error: out of memory (ask for fewer frames, a smaller --size or --crowd)", err=True)
        code = 2
    finally:
        if argv is None:  # the process ends here: no collection on the way out
            gc.freeze()
        gc.set_threshold(*gc_threshold)
        if in_main_thread:  # None: the old handler was not set from Python; the default it is
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            if signal.getsignal(signal.SIGALRM) is _on_sigterm:  # a retry still armed: disarmed
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
    sys.exit(code if isinstance(code, int) else 0)
