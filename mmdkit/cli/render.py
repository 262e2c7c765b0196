"""`mmdkit render`: a model dancing to a motion → a video, one PNG, or a folder of PNG frames.

In: MODEL MOTION (or --demo), options for camera, physics, frames, size, fps, MSAA, crowd,
audio. Out: the video/frames, written atomically, with a progress bar and a summary line.
"""

from __future__ import annotations

import math
import time

import click

from mmdkit.animation.frames import MOTION_FPS, parse_frames
from mmdkit.cli._common import (CLIP_HELP, FRAMES_DEFAULT, FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, VERBOSE_HELP,
                                VPD_OPTION_HELP, apply_vpd_options, compile_note, load_as, load_model_motion,
                                report_binding, show_progress, warn)
from mmdkit.cli._frames import compile_clock, warn_past_end
from mmdkit.cli._output import check_output, count, writing
from mmdkit.errors import OptionError
from mmdkit.render.video import SUPPORTED


#: Most characters in one crowd: each has its own pose state and physics world.
MAX_CROWD = 100
#: Largest --palette: 16 KB, the smallest uniform block OpenGL guarantees, holds 256 matrices.
MAX_PALETTE = 256


def _size(value: str):
    try:
        w, h = (int(x) for x in value.lower().split("x"))
        if w < 16 or h < 16 or w > 8192 or h > 8192:
            raise ValueError
        return w, h
    except ValueError:
        raise OptionError("--size", f"'{value}' is not WIDTHxHEIGHT (16..8192)") from None


def _check_options(demo, model_path, fps, crowd, palette_size) -> None:
    """The render options the CLI bounds, checked before anything is loaded (OptionError naming the
    first bad one). MSAA, output and audio are checked by the renderer and its writers."""
    if demo and model_path:
        raise OptionError("--demo", f"renders the built-in character; give either --demo or MODEL MOTION, "
                                    f"not both (got {model_path})")
    if not math.isfinite(fps) or not 1 <= fps <= 1000:
        raise OptionError("--fps", f"must be a number of frames per second from 1 to 1000, got {fps:g}")
    if not 1 <= crowd <= MAX_CROWD:
        raise OptionError("--crowd", f"must be from 1 to {MAX_CROWD} characters, got {crowd}")
    if palette_size is not None and not 1 <= palette_size <= MAX_PALETTE:
        raise OptionError("--palette", f"must be from 1 to {MAX_PALETTE} bones (leave it out to skin "
                                       f"through the bone texture), got {palette_size}")


def _load(demo, model_path, motion_path, clip, camera_path, vpd_specs, frames, fps, quiet):
    """(model, motion, camera or None, frames (F,)) from the arguments as typed (or the demo's);
    frames are 30/fps motion frames apart unless --frames gives a STEP, so a video plays in real
    time. Says how the motion bound and warns when --camera holds no camera keys."""
    from mmdkit import Motion, Pose

    if demo:  # Gene dancing WAVEFILE, shipped in the package; the lively span unless --frames says
        from mmdkit.demo import DEMO_FRAMES, demo_character

        (model, motion), motion_label = demo_character(), ""
        frames = frames or "{}:{}".format(*DEMO_FRAMES)
    elif not model_path:
        raise OptionError("MODEL MOTION", "give both (MOTION may be left out when MODEL carries clips), or --demo")
    else:
        model, motion, motion_label = load_model_motion(model_path, motion_path, clip)
    if isinstance(motion, Pose):  # a pose: one key at frame 0, one picture unless --frames says otherwise
        from mmdkit.animation.vpd import motion_from_pose

        motion = motion_from_pose(motion)
        frames = frames or "0"
    motion = apply_vpd_options(model, motion, vpd_specs)
    camera = load_as(camera_path, Motion, "camera motion (.vmd)", arg="--camera") if camera_path else None
    last = max(motion.last_frame, camera.last_frame if camera is not None else 0)
    typed = frames if not demo else None
    frame_list = parse_frames(frames or FRAMES_DEFAULT, max(last, 1), default_step=MOTION_FPS / fps)
    warn_past_end(typed, frame_list, last, camera_path if last > motion.last_frame else motion_label)
    if not demo:
        report_binding(model, motion, motion_label, quiet=quiet)
    if camera is not None and not camera.has_camera:
        warn(f"--camera {camera_path} has no camera keys; the automatic camera frames the character")
    return model, motion, camera, frame_list


@click.command("render")
@click.argument("model_path", metavar="MODEL", required=False, type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="[MOTION]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--clip", default=None, metavar="NAME|INDEX", help=CLIP_HELP)
@click.option("--demo", is_flag=True, help="Render the built-in demo character and dance (nothing downloaded).")
@click.option("--camera", "camera_path", type=click.Path(exists=True, dir_okay=False),
              help="A camera motion (.vmd); default: an automatic camera framing the character.")
@click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP)
@click.option("--frames", default=None, help=f"Motion frames: {FRAMES_HELP} Without a STEP, frames are 30/FPS "
              "apart, so the video plays in real time. Default: the whole motion.")
@click.option("--size", default=None, help="WIDTHxHEIGHT [default: 1280x720; demo 640x360].")
@click.option("--fps", default=30.0, show_default=True,
              help="Output frame rate, 1..1000; the dance plays in real time (MMD motions are 30 fps: "
                   "--fps 60 samples between keys).")
@click.option("--msaa", default=4, show_default=True,
              help="Multisample anti-aliasing samples (0 = off). Free on a GPU; on a CPU-only machine "
                   "(llvmpipe) 4x costs about 3x the drawing time.")
@click.option("--crowd", default=1, show_default=True,
              help="Draw N characters of the model (instanced, 1..100): a grid of ceil(sqrt(N)) per row, front row "
                   "first, centred; characters 1.3 × the model's width (or depth, the larger) + 2 units apart; "
                   "each dances 7 frames behind the one before it, with its own physics.")
@click.option("--palette", "palette_size", type=int, default=None,
              help="Skin through palette batches of at most P bones in a uniform buffer (e.g. 36) "
                   "instead of the bone texture — for drivers with small limits.")
@click.option("--ground-shadow/--no-ground-shadow", default=True, show_default=True,
              help="MMD's ground shadow (the model flattened onto the floor along the light).")
@click.option("--self-shadow/--no-self-shadow", default=False, show_default=True,
              help="MMD's self-shadow: parts of the model shade others (a shadow map from the light). "
                   "Free on a GPU; about 15 ms a frame on a CPU-only (llvmpipe) machine.")
@click.option("--vpd", "vpd_specs", multiple=True, metavar="FILE.vpd@FRAME[:WEIGHT]", help=VPD_OPTION_HELP)
@click.option("--audio", type=click.Path(exists=True, dir_okay=False),
              help="A sound file put into the video from the first rendered frame's time on.")
@click.option("-o", "--output", required=True, help=f"Where to write: {SUPPORTED}.")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
def command(model_path, motion_path, clip, demo, camera_path, physics, frames, size, fps, msaa, crowd, palette_size,
            ground_shadow, self_shadow, vpd_specs, audio, output, quiet, verbose):
    """Render MODEL dancing to MOTION (a .vmd, or a .vpd pose; left out: a clip MODEL carries), headless
    (OpenGL through EGL; GPU or CPU). The folder -o writes into must exist.

    \b
    Examples:
      mmdkit render --demo -o demo.mp4
      mmdkit render Gene.pmx wavefile_v2.vmd --frames 0:300 -o gene.mp4
      mmdkit render Gene.pmx wavefile_v2.vmd --camera cam.vmd --size 1920x1080 -o out/
      mmdkit render Fox.glb --clip Run -o fox.mp4
    """
    from mmdkit.render.pipeline import render_motion

    _check_options(demo, model_path, fps, crowd, palette_size)
    width_height = _size(size or ("640x360" if demo else "1280x720"))
    inputs = (model_path, motion_path, camera_path, audio, *(spec.rpartition("@")[0] for spec in vpd_specs))
    check_output(output, inputs, folder_ok=True)
    with compile_note(quiet), compile_clock() as compiling:
        model, motion, camera, frame_list = _load(demo, model_path, motion_path, clip, camera_path, vpd_specs,
                                                  frames, fps, quiet)
        with writing(output):
            stats = render_motion(model, motion, output, frames=frame_list, camera=camera, size=width_height,
                                  fps=fps, msaa=msaa, physics=physics, crowd=crowd, audio=audio,
                                  palette_size=palette_size, ground_shadow=ground_shadow, self_shadow=self_shadow,
                                  floor=demo, progress=show_progress(quiet), warn=warn)
    if not quiet:  # kernels compiled while drawing (a first run) are not drawing time
        done = time.perf_counter()
        compiled = compiling.seconds_within(done - stats["seconds"], done)
        drawing = stats["seconds"] - compiled
        rate = (f"{stats['frames'] / drawing:.1f} frames/s, not counting {compiled:.1f} s compiling kernels"
                if compiled > 0.05 and drawing > 0 else f"{stats['fps']:.1f} frames/s")
        click.echo(f"wrote {output}: {count(stats['frames'], 'frame')} in {stats['seconds']:.1f} s ({rate})")
