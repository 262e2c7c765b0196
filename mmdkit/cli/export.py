"""`mmdkit export MODEL [MOTION] -o OUT.{glb,gltf,bvh,vmd,npz}`: the motion baked through the full pipeline.

In: a PMX/PMD model, optionally a VMD motion (or VPD pose) and a camera VMD, options. Out: the
file ``mmdkit.export.export`` writes for the output's extension (see docs/export.md) and one
summary line.
"""

from __future__ import annotations

import os

import click

from mmdkit.animation.frames import MOTION_FPS, parse_frames
from mmdkit.cli._common import (FRAMES_DEFAULT, FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, VERBOSE_HELP, compile_note,
                                load_as, report_binding, show_progress, warn)
from mmdkit.cli._frames import warn_past_end
from mmdkit.cli._memory import check_frames_memory, out_of_memory_blames
from mmdkit.cli._output import check_output, count, writing

#: Bytes each bone costs per frame until the file is written, by output format: the bake (176: world
#: matrix, positions, rotations, local translations and rotations) plus the writer's own arrays;
#: measured as peak memory over 20,000 frames of an 83-bone model, rounded up.
BYTES_PER_BONE_FRAME = {".glb": 256, ".gltf": 256, ".vmd": 448, ".bvh": 544, ".npz": 352}


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


@click.command("export")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="[MOTION]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Output file: .glb/.gltf (mesh + animation), .bvh (skeleton), .vmd (baked motion), "
                   ".npz (dataset arrays).")
@click.option("--frames", default=FRAMES_DEFAULT, show_default=True,
              help=FRAMES_HELP + " Without a STEP, frames are 30/--fps motion frames apart.")
@click.option("--fps", default=30.0, show_default=True, type=float, help="Output frames per second.")
@click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP)
@click.option("--camera", "camera_path", type=click.Path(exists=True, dir_okay=False),
              help="Camera VMD to export as an animated camera (glTF).")
@click.option("--joints", type=click.Choice(["all", "humanoid"]), default=None,
              help="Joints of .npz/.bvh output: every bone (default) or the humanoid list of docs/export.md.")
@click.option("--scale", type=float, default=None,
              help="Output units per MMD unit (default 1; glTF: 0.08, metres).")
@click.option("--vertices", is_flag=True, help=".npz: also the skinned vertices (F,V,3), streamed frame by frame.")
@click.option("--reduce", "reduce_tol", type=float, default=None, metavar="TOL",
              help=".vmd/.glb: drop keys while every bone, re-posed from the kept ones, stays within TOL "
                   "units of the run (.vmd: default none, every frame keyed).")
@click.option("--reduce-physics", "reduce_physics", default=None, metavar="TOL2",
              help=".vmd with --reduce: TOL2 units instead of TOL for the bones physics drives and the "
                   "bones below them (default TOL); the other bones keep TOL.")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
def command(model_path, motion_path, output, frames, fps, physics, camera_path, joints, scale, vertices, reduce_tol,
            reduce_physics, quiet, verbose):
    """Bake MOTION on MODEL (IK, append, morphs, physics) and write it by OUT's extension.

    \b
    Examples:
      mmdkit export Gene.pmx wavefile_v2.vmd -o dance.glb
      mmdkit export Gene.pmx wavefile_v2.vmd -o dance.bvh --joints humanoid --scale 0.08
      mmdkit export Gene.pmx wavefile_v2.vmd -o baked.vmd --reduce 0.001
      mmdkit export Gene.pmx wavefile_v2.vmd -o baked.vmd --reduce 0.001 --reduce-physics 0.05
      mmdkit export Gene.pmx wavefile_v2.vmd -o data.npz --joints humanoid --fps 60
    """
    from mmdkit import Model, Motion, Pose
    from mmdkit.animation.frames import check_fps
    from mmdkit.export import check_options, export

    # an unknown extension or an option the format does not take is refused before loading anything
    check_options(output, "-o", flag_prefix="--", camera=camera_path, joints=joints, scale=scale, vertices=vertices,
                  reduce=reduce_tol, reduce_physics=reduce_physics)
    if reduce_physics is not None:  # a one-line OptionError naming --reduce-physics, before loading anything
        from mmdkit.export.vmd import check_tolerance

        reduce_physics = check_tolerance(reduce_tol, reduce_physics)[1]
    fps = check_fps(fps, "--fps")
    check_output(output, (model_path, motion_path, camera_path))
    with compile_note(quiet):
        model = load_as(model_path, Model, "model (.pmx/.pmd)")
        motion = None
        if motion_path:
            motion = load_as(motion_path, (Motion, Pose), "motion (.vmd) or pose (.vpd)", arg="MOTION")
            report_binding(model, motion, motion_path, quiet=quiet)
        camera = load_as(camera_path, Motion, "camera motion (.vmd)", arg="--camera") if camera_path else None
        last = motion.last_frame if isinstance(motion, Motion) else 0
        frame_list = parse_frames(frames, last, default_step=MOTION_FPS / fps)
        per_bone = BYTES_PER_BONE_FRAME.get(os.path.splitext(output)[1].lower(), max(BYTES_PER_BONE_FRAME.values()))
        check_frames_memory(frames, len(frame_list), 8 + model.num_bones * per_bone + model.num_morphs * 8,
                            f"{model.num_bones:,} bones", "export")
        warn_past_end(frames if frames != FRAMES_DEFAULT else None, frame_list, last, motion_path or model_path)
        with writing(output), out_of_memory_blames(
                "--frames", f"exporting '{frames}' ({len(frame_list):,} frames of {model_path})",
                "export fewer frames per run"):
            info = export(model, motion, output, frames=frame_list, fps=fps, physics=physics, camera=camera,
                          joints=joints, scale=scale, vertices=vertices, reduce=reduce_tol,
                          reduce_physics=reduce_physics, warn=warn,
                          progress=show_progress(quiet) and len(frame_list) > 200)
    if not quiet:
        click.echo(summary(output, info, len(frame_list), fps))
