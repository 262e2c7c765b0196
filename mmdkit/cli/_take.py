"""The CLI's way into the front door: options as typed → a validated Take → one pass → summary lines.

In: the values of ``render``/``export``/``pose``-style options (MODEL, MOTION, --clip, --vpd,
--camera, --frames, --fps, --physics, --crowd, -o ... and each output's own options). Out: a
``Take`` named the CLI's way (``runtime.take.CLI_NAMES``), the outputs checked before anything is
loaded (``check_outputs``), the inputs loaded once with the notes and warnings every command prints
(``load``: the binding report, frames past the motion's end, a camera file without camera keys)
and the summaries of ``mmdkit.io.run``'s single pass.
"""

from __future__ import annotations

import os
import time

import click

from mmdkit.cli._common import SHOWN_WARNINGS, report_bound, warn
from mmdkit.cli._frames import warn_past_end
from mmdkit.cli._output import check_output, count, writing
from mmdkit.errors import OptionError
from mmdkit.runtime.driver import run
from mmdkit.runtime.take import CLI_NAMES, Output, Take

def _io():
    """``mmdkit.io`` (the renderer and the exporters behind it), imported when a command has outputs:
    ``mmdkit pose`` and ``bench`` never load OpenGL or the video codecs."""
    import mmdkit.io

    return mmdkit.io


OPTION_NAMES = {"size": "--size", "msaa": "--msaa", "palette_size": "--palette", "ground_shadow": "--ground-shadow",
                "self_shadow": "--self-shadow", "floor": "--floor", "audio": "--audio", "joints": "--joints",
                "scale": "--scale", "vertices": "--vertices", "reduce": "--reduce",
                "reduce_physics": "--reduce-physics", "annotate": "--annotate", "views": "--views",
                "view_height": "--view-height", "view_radius": "--view-radius", "view_fov": "--view-fov",
                "shards": "--shards", "preview": "--preview", "normals": "--normals",
                "correspondence": "--correspondence"}
"""How the command line names each output option."""


def make_take(model_path, motion_path, *, clip=None, vpd_specs=(), camera_path=None, frames=None, fps=30.0,
              physics=True, crowd=1, outputs=(), options=None, rest_pose=True, bare_count=False,
              source=None) -> Take:
    """The Take the options describe; every output gets the options (``options``: name → value)
    that its kind takes. An option no output takes is refused (OptionError naming it)."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    outs = []
    for path in outputs:
        takes = _takes(path)
        outs.append(Output(path, {k: v for k, v in options.items() if k in takes}))
    for k in options:
        if not any(k in _takes(p) for p in outputs):
            kinds = ", ".join(sorted({_kind(p) for p in outputs})) or "no output"
            raise OptionError(OPTION_NAMES.get(k, k), f"does not apply to {kinds} output")
    return Take(model_path, motion_path, clip=clip, vpd=tuple(vpd_specs), camera=camera_path, frames=frames,
                fps=fps, physics=physics, crowd=crowd, outputs=tuple(outs), rest_pose=rest_pose,
                bare_count=bare_count, source=source, names=CLI_NAMES).validate()


def _kind(path) -> str:
    ext = os.path.splitext(str(path))[1].lower()
    return ext if _io().is_export(path) else "picture/video"


def _takes(path) -> tuple:
    io = _io()
    return tuple(io.writer_for(path).OPTIONS) if io.is_export(path) else io.RENDER_OPTIONS + io.ANNOTATE_OPTIONS


def check_outputs(take: Take, *, extra_inputs=()) -> list:
    """Each output path checked (not an input, its folder exists and is writable; pictures may be a
    folder) and its sink made (its options checked): all before anything is loaded."""
    inputs = [take.model, take.motion, take.camera, take.source, *(s.rpartition("@")[0] for s in take.vpd),
              *extra_inputs]
    inputs = [str(p) for p in inputs if isinstance(p, str) and p]
    for out in take.outputs:
        check_output(out.path, inputs, folder_ok=not _io().is_export(out.path))
    return _io().sinks_for(take, warn=warn, flag_prefix="--", names=OPTION_NAMES)


def load(take: Take, *, quiet: bool, report: bool = True, check=None):
    """The LoadedTake, saying what every command says about it on stderr (after ``check(loaded)``,
    which may refuse it: e.g. more frames than memory holds)."""
    loaded = take.load(warn, shown=SHOWN_WARNINGS)
    if check is not None:
        check(loaded)
    typed = take.frames if isinstance(take.frames, str) else None
    source = loaded.motion_label
    if loaded.camera is not None and loaded.motion is not None and loaded.last_frame > loaded.motion.last_frame:
        source = str(take.camera)
    warn_past_end(typed, loaded.frames, loaded.last_frame, source or loaded.model_path)
    if report and loaded.motion is not None:
        report_bound(loaded.bound, loaded.motion_label, quiet=quiet)
    if loaded.camera is not None and not loaded.camera.has_camera:
        warn(f"--camera {take.camera} has no camera keys; the automatic camera frames the character")
    return loaded


def run_take(loaded, sinks, *, progress: bool, desc: str) -> list[dict]:
    """One pass over ``loaded`` into ``sinks``; an OSError while writing names the output(s) typed."""
    paths = ", ".join(str(o.path) for o in loaded.take.outputs)
    with writing(paths):
        return run(loaded, sinks, progress=progress, desc=desc)


def echo(line: str, quiet: bool) -> None:
    if not quiet:
        click.echo(line)


SOURCE_HELP = ("The model MOTION was made for: when MOTION's bone names mostly miss MODEL (a VMD on a VRM), "
               "it is retargeted onto MODEL from this model (docs/retarget.md).")


def take_options(f):
    """The options every command making a Take with outputs has (render, export)."""
    from mmdkit.cli._common import CLIP_HELP, FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, VERBOSE_HELP, VPD_OPTION_HELP

    opts = [
        click.option("--clip", default=None, metavar="NAME|INDEX", help=CLIP_HELP),
        click.option("--camera", "camera_path", type=click.Path(exists=True, dir_okay=False),
                     help="A camera motion (.vmd): the view of pictures and videos (default: an automatic camera "
                          "framing the character), an animated camera in .glb/.gltf."),
        click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP),
        click.option("--frames", default=None, help=f"Motion frames: {FRAMES_HELP} Without a STEP, frames are "
                     "30/FPS apart, so an output plays in real time. Default: the whole motion."),
        click.option("--fps", default=30.0, show_default=True, type=float,
                     help="Output frame rate (above 0, at most 1000); the dance plays in real time (MMD motions "
                          "are 30 fps: --fps 60 samples between keys)."),
        click.option("--crowd", default=1, show_default=True,
                     help="N characters of the model (1..100): a grid of ceil(sqrt(N)) per row, front row first, "
                          "centred; 1.3 × the model's width (or depth, the larger) + 2 units apart; each dances 7 "
                          "frames behind the one before it, with its own physics. Exports write the first."),
        click.option("--vpd", "vpd_specs", multiple=True, metavar="FILE.vpd@FRAME[:WEIGHT]", help=VPD_OPTION_HELP),
        click.option("--source", "source_path", default=None, metavar="SOURCE_MODEL", help=SOURCE_HELP),
        click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP),
        click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def output_options(f):
    """Each output kind's own options; an output takes those of its kind (pictures/videos: --size ...;
    exports: --joints ...), one pass writes them all."""
    opts = [
        click.option("--size", default=None, help="Pictures/videos: WIDTHxHEIGHT [default: 1280x720; demo 640x360]."),
        click.option("--msaa", default=None, type=int,
                     help="Pictures/videos: multisample anti-aliasing samples (0 = off) [default: 4]. Free on a "
                          "GPU; on a CPU-only machine (llvmpipe) 4x costs about 3x the drawing time."),
        click.option("--palette", "palette_size", type=int, default=None,
                     help="Pictures/videos: skin through palette batches of at most P bones in a uniform buffer "
                          "(e.g. 36) instead of the bone texture — for drivers with small limits."),
        click.option("--ground-shadow/--no-ground-shadow", default=None,
                     help="Pictures/videos: MMD's ground shadow (the model flattened onto the floor along the "
                          "light) [default: on]."),
        click.option("--self-shadow/--no-self-shadow", default=None,
                     help="Pictures/videos: MMD's self-shadow (a shadow map from the light) [default: off]. Free "
                          "on a GPU; about 15 ms a frame on a CPU-only (llvmpipe) machine."),
        click.option("--audio", type=click.Path(exists=True, dir_okay=False),
                     help="Videos: a sound file put in from the first rendered frame's time on."),
        click.option("--joints", type=click.Choice(["all", "humanoid"]), default=None,
                     help=".npz/.bvh: every bone (default) or the humanoid list of docs/export.md."),
        click.option("--scale", type=float, default=None,
                     help="Exports: output units per MMD unit (default 1; glTF: 0.08, metres)."),
        click.option("--vertices", is_flag=True, default=None,
                     help=".npz: also the skinned vertices (F,V,3), streamed frame by frame."),
        click.option("--reduce", "reduce_tol", type=float, default=None, metavar="TOL",
                     help=".vmd/.glb: drop keys while every bone, re-posed from the kept ones, stays within TOL "
                          "units of the run (.vmd: default none, every frame keyed)."),
        click.option("--reduce-physics", "reduce_physics", default=None, metavar="TOL2",
                     help=".vmd with --reduce: TOL2 units instead of TOL for the bones physics drives and the "
                          "bones below them (default TOL); the other bones keep TOL."),
        click.option("--annotate", is_flag=True, default=None,
                     help="A folder output becomes a dataset: per view and frame RGB, depth, character masks and "
                          "body parts, plus COCO keypoints, calibrated cameras and 3D joints (docs/dataset.md)."),
        click.option("--views", default=None, metavar="N|cams.json",
                     help="--annotate: N cameras on a ring around the character, or a cameras.json (the layout "
                          "the annotated render writes); --camera adds the MMD camera as one more view "
                          "[default: the automatic camera]."),
        click.option("--view-height", type=float, default=None, metavar="M",
                     help="--views N: the cameras' height above the floor, metres [default: frames the motion]."),
        click.option("--view-radius", type=float, default=None, metavar="M",
                     help="--views N: the ring's radius, metres [default: the motion fills the picture]."),
        click.option("--view-fov", type=float, default=None, metavar="DEG",
                     help="--views N: vertical field of view, degrees [default: 30]."),
        click.option("--shards", type=int, default=None, metavar="N",
                     help="--annotate: also N WebDataset tar shards (one sample per view and frame) in OUT/shards/."),
        click.option("--preview", is_flag=True, default=None,
                     help="--annotate: also OUT/preview.png, a contact sheet of the middle frame's views and labels."),
        click.option("--normals", is_flag=True, default=None,
                     help="--annotate: also OUT/view_XX/normal/: the surface normal per pixel, camera space."),
        click.option("--correspondence", is_flag=True, default=None,
                     help="--annotate: also OUT/view_XX/{vertex,face,uv_u,uv_v}/: the model's vertex, triangle and UV "
                          "drawn at each pixel."),
        click.option("-o", "--output", "outputs", required=True, multiple=True,
                     help="Where to write (repeatable: one pass writes them all): a video (.mp4 .mov .mkv .webm "
                          ".avi .gif), one .png, a folder of PNG frames, or .glb/.gltf (mesh + animation), .bvh "
                          "(skeleton), .vmd (baked motion), .vrma (VRM Animation of the humanoid), .npz (dataset "
                          "arrays)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


#: Bytes each bone costs per frame until an export is written, by format: the bake (176: world
#: matrix, positions, rotations, local translations and rotations) plus the writer's own arrays;
#: measured as peak memory over 20,000 frames of an 83-bone model, rounded up.
BYTES_PER_BONE_FRAME = {".glb": 256, ".gltf": 256, ".vmd": 448, ".bvh": 544, ".npz": 352, ".vrma": 256}


def execute(command: str, p: dict, *, demo: bool = False) -> None:
    """``render``/``export`` with the options ``p`` as click passes them: one Take, one pass, a line
    per output."""
    from mmdkit.cli._common import compile_note, show_progress
    from mmdkit.cli._frames import compile_clock

    quiet = p["quiet"]
    model_path, motion_path, frames = p["model_path"], p["motion_path"], p["frames"]
    if demo:
        if model_path:
            raise OptionError("--demo", f"renders the built-in character; give either --demo or MODEL MOTION, "
                                        f"not both (got {model_path})")
        from mmdkit.demo import DEMO_FRAMES, demo_paths

        model_path, motion_path = (str(x) for x in demo_paths())
        frames = frames or "{}:{}".format(*DEMO_FRAMES)
    elif not model_path:
        raise OptionError("MODEL MOTION", "give both (MOTION may be left out when MODEL carries clips), or --demo")
    pictures = any(not _io().is_export(o) for o in p["outputs"])
    options = _output_values(p, demo and pictures)
    take = make_take(model_path, motion_path, clip=p["clip"], vpd_specs=p["vpd_specs"], camera_path=p["camera_path"],
                     frames=frames, fps=p["fps"], physics=p["physics"], crowd=p["crowd"], outputs=p["outputs"],
                     options=options, rest_pose=command == "export",  # render: a motion or a clip to play
                     source=p.get("source_path"))
    sinks = check_outputs(take, extra_inputs=[p["audio"]] if p["audio"] else ())
    with compile_note(quiet), compile_clock() as compiling:
        loaded = load(take, quiet=quiet, report=not demo,
                      check=lambda loaded: _check_memory(loaded, p["frames"] or "0:", command))
        with _blame_memory(loaded, p["frames"] or "0:", command):
            stats = run_take(loaded, sinks, progress=show_progress(quiet) and (pictures or len(loaded.frames) > 200),
                             desc="rendering" if pictures else "baking")
    for out, info in zip(take.outputs, stats):
        echo(summary_line(out.path, info, loaded, compiling), quiet)


def _output_values(p: dict, demo_pictures: bool) -> dict:
    """The output options typed (None where left out), checked where the CLI bounds them."""
    palette = p["palette_size"]
    _io().check_palette(palette, "--palette")
    size = _io().parse_size(p["size"], "--size") if p["size"] else ((640, 360) if demo_pictures else None)
    reduce_physics = p["reduce_physics"]
    if reduce_physics is not None and any(str(o).lower().endswith(".vmd") for o in p["outputs"]):
        from mmdkit.export.vmd import check_tolerance  # one line naming --reduce-physics, before loading

        reduce_physics = check_tolerance(p["reduce_tol"], reduce_physics)[1]
    return dict(size=size, msaa=p["msaa"], palette_size=palette, ground_shadow=p["ground_shadow"],
                self_shadow=p["self_shadow"], floor=True if demo_pictures else None, audio=p["audio"],
                joints=p["joints"], scale=p["scale"], vertices=p["vertices"] or None, reduce=p["reduce_tol"],
                reduce_physics=reduce_physics, **{k: p.get(k) for k in _io().ANNOTATE_OPTIONS})


def _export_bytes_per_frame(loaded) -> int:
    """Bytes the take's export outputs hold per frame until written (0 without exports)."""
    model = loaded.model
    per_bone = sum(BYTES_PER_BONE_FRAME[os.path.splitext(str(o.path))[1].lower()]
                   for o in loaded.take.outputs if _io().is_export(o.path))
    return 8 + model.num_bones * per_bone + model.num_morphs * 8 if per_bone else 0


def _check_memory(loaded, spec: str, command: str) -> None:
    from mmdkit.cli._memory import check_frames_memory

    per_frame = _export_bytes_per_frame(loaded)
    if per_frame:
        check_frames_memory(spec, len(loaded.frames), per_frame, f"{loaded.model.num_bones:,} bones", command)


def _blame_memory(loaded, spec: str, command: str):
    from mmdkit.cli._memory import out_of_memory_blames

    return out_of_memory_blames("--frames", f"{command}ing '{spec}' ({len(loaded.frames):,} frames of "
                                            f"{loaded.model_path})", f"{command} fewer frames per run")


def summary(output: str, info: dict, num_frames: int, fps: float) -> str:
    """The line ``mmdkit export`` prints: what the writer's summary dict (``info``) says, in words."""
    frames = int(info.get("frames", num_frames))
    parts = [count(frames, "frame") + (f" ({frames / fps:,.2f} s at {fps:g} fps)" if frames > 1 else "")]
    if "keys" in info:  # glTF
        parts.append(f"{count(info['joints'], 'joint')} for {count(info['bones'], 'bone')}"
                     + (f", {count(info['morph_targets'], 'morph target')}" if info.get("morph_targets") else ""))
        kept = f"{info['keys']:,} of {info['full_keys']:,} keys kept"
        parts.append(kept + (f" (within {info['tolerance']:.3g} MMD units)" if info.get("tolerance") else ""))
        if info.get("linearised_vertices"):
            parts.append(f"{count(info['linearised_vertices'], 'SDEF/QDEF vertex', 'SDEF/QDEF vertices')} linear")
        parts.append(f"scale {info['scale']:g}")
        extra = [os.path.basename(f) for f in info.get("files", ())[1:]]
        parts.append(f"{info['bytes'] / 2**20:,.1f} MiB" + (f" with {', '.join(extra)}" if extra else ""))
    elif "bone_keys" in info:  # VMD
        parts.append(f"{count(info['bone_keys'], 'bone key')} for {count(info['bones_keyed'], 'bone')} "
                     f"(of {info['full_keys']:,}, one per bone and frame)")
        if info.get("bones_not_keyable"):
            parts.append(f"{count(info['bones_not_keyable'], 'bone')} not keyable")
    else:  # BVH, npz
        parts.append(count(info["joints"], "joint"))
        if info.get("channels"):
            parts.append(count(info["channels"], "channel"))
        if info.get("vertices"):
            parts.append(f"{count(info['vertices'], 'vertex', 'vertices')} a frame")
    if "physics" in info:
        parts.append("physics on" if info["physics"] else "physics off")
    return f"wrote {output}: " + ", ".join(parts)


def summary_line(path, info: dict, loaded, compiling) -> str:
    """The line a command prints for one output it wrote."""
    if _io().is_export(path):
        return summary(str(path), info, len(loaded.frames), loaded.fps)
    done = time.perf_counter()  # kernels compiled while drawing (a first run) are not drawing time
    compiled = compiling.seconds_within(done - info["seconds"], done)
    drawing = info["seconds"] - compiled
    rate = (f"{info['frames'] / drawing:.1f} frames/s, not counting {compiled:.1f} s compiling kernels"
            if compiled > 0.05 and drawing > 0 else f"{info['fps']:.1f} frames/s")
    views = f" × {count(info['views'], 'view')}" if "views" in info else ""
    return f"wrote {path}: {count(info['frames'], 'frame')}{views} in {info['seconds']:.1f} s ({rate})"
