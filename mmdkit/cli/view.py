"""`mmdkit view MODEL [MOTION]`: an interactive viewer in the browser, served from this machine.

In: a model (PMX/PMD, glTF/VRM, …), optionally a motion (VMD/VPD, or a clip of MODEL: the first
when MOTION is left out), a camera
VMD, a song, --port, --host, --no-browser, or --demo (the shipped Gene_light + WAVEFILE dance).
Out: the page's URL on stdout; serves until Ctrl-C / SIGTERM (then nothing is left running).
A taken --port: one line, exit 2.
"""

from __future__ import annotations

import time

import click

from mmdkit.cli._common import CLIP_HELP, PHYSICS_HELP, QUIET_HELP, SHOWN_WARNINGS, compile_note, warn
from mmdkit.errors import OptionError
from mmdkit.threads import import_numba_without_blas_probe
from mmdkit.viewer import read_audio


def _check(demo, model_path, audio_path) -> None:
    """OptionError for arguments that do not go together, before anything starts (the values the
    Take holds, --crowd among them, are checked by ``Take.validate`` as every command checks them)."""
    if demo and model_path:
        raise OptionError("--demo", f"views the built-in character; give either --demo or MODEL ({model_path})")
    if not demo and not model_path:
        raise OptionError("MODEL", "give a model to view (or --demo)")
    if audio_path is not None:
        try:
            read_audio(audio_path)
        except OptionError as e:
            raise OptionError("--audio", e.detail) from None


def _inputs(demo, model_path, motion_path, clip, camera_path, crowd):
    """(model, motion or None, camera or None) as typed, or the demo's: loaded as every command
    loads a Take (a model alone: its first clip when it carries some (glTF), else the rest pose)."""
    from mmdkit.demo import demo_paths
    from mmdkit.runtime.take import CLI_NAMES, Take

    if demo:
        model_path, motion_path = (str(p) for p in demo_paths())
    take = Take(model_path, motion_path, clip=clip, camera=camera_path, crowd=crowd, names=CLI_NAMES)
    loaded = take.validate().load(warn, shown=SHOWN_WARNINGS)
    model, motion, camera = loaded.model, loaded.motion, loaded.camera
    if camera is not None and not camera.num_camera_keys:
        raise OptionError("--camera", f"{camera_path} has no camera keys")
    return model, motion, camera


def _early_glb(viewer, demo, model_path) -> None:
    """Hand the page the model's cached GLB (if any) before numba and the model load (~1 s): the
    browser parses it meanwhile. The cache key is the one ``mmdkit.view(..., cache=True)`` uses."""
    from mmdkit.demo import demo_paths
    from mmdkit.viewer.cache import cached_glb, glb_cache_key

    glb = cached_glb(glb_cache_key(demo_paths()[0] if demo else model_path))
    if glb is not None:
        viewer.server.show_glb(glb)


@click.command("view")
@click.argument("model_path", metavar="MODEL", required=False, type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="[MOTION]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--clip", default=None, metavar="NAME|INDEX", help=CLIP_HELP)
@click.option("--camera", "camera_path", type=click.Path(exists=True, dir_okay=False),
              help="Camera motion (.vmd) the view can follow (toggle on the page).")
@click.option("--audio", "audio_path", type=click.Path(exists=True, dir_okay=False),
              help="Song played in sync with the timeline (.wav, .mp3, .ogg, .m4a, .flac).")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (127.0.0.1: this machine only).")
@click.option("--browser/--no-browser", default=True, show_default=True, help="Open the page in the web browser.")
@click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP)
@click.option("--crowd", default=1, show_default=True,
              help="Characters, laid out and offset in time as `mmdkit render --crowd` does.")
@click.option("--demo", is_flag=True, help="View the built-in demo: Gene dancing WAVEFILE (shipped, nothing downloaded).")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
def command(model_path, motion_path, clip, camera_path, audio_path, port, host, browser, physics, crowd, demo, quiet):
    """Play MODEL with MOTION in the browser: timeline, physics, camera, bones and rigid bodies.

    \b
    Example:
      mmdkit view Gene.pmx wavefile_v2.vmd --audio song.wav
      mmdkit view --demo
      mmdkit view Fox.glb --clip Run --no-browser --port 8765
    """
    import webbrowser

    from mmdkit.viewer import start

    _check(demo, model_path, audio_path)
    viewer = start(host, port)  # serving the page before numba loads: the browser starts meanwhile
    try:
        click.echo(f"mmdkit view: {viewer.url}  (Ctrl-C stops)")
        if browser:
            webbrowser.open(viewer.url)
        t0 = time.perf_counter()
        _early_glb(viewer, demo, model_path)
        import_numba_without_blas_probe()
        import mmdkit

        with compile_note(quiet):
            model, motion, camera = _inputs(demo, model_path, motion_path, clip, camera_path, crowd)
            load_ms = 1e3 * (time.perf_counter() - t0)
            mmdkit.view(model, motion, camera=camera, audio=audio_path, physics=physics, viewer=viewer,
                        notes={"timings": {"load": load_ms}}, cache=True, crowd=crowd)
        viewer.wait()
    finally:
        viewer.stop()
